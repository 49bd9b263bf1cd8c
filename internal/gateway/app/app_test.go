package app

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	valid := func() Options {
		return Options{ClusterID: "hub", TLSCertFile: "g.crt", TLSKeyFile: "g.key", ClientCAFile: "ca.crt", EdgeListen: ":7444",
			Azure: AzureOptions{Credential: "default", PollInterval: 10 * time.Second}}
	}
	azure := func(o *Options) {
		o.Azure.SubscriptionID, o.Azure.ResourceGroup, o.Azure.Location = "0000", "fleet", "westeurope"
	}
	tests := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"valid", func(*Options) {}, ""},
		{"valid with azure", azure, ""},
		{"bad cluster id", func(o *Options) { o.ClusterID = "Hub" }, `--cluster-id="Hub"`},
		{"azure without group", func(o *Options) { azure(o); o.Azure.ResourceGroup = "" }, "--azure-resource-group is required"},
		{"azure without location", func(o *Options) { azure(o); o.Azure.Location = "" }, "--azure-location is required"},
		{"azure credential", func(o *Options) { azure(o); o.Azure.Credential = "password" }, `--azure-credential="password"`},
		{"azure poll", func(o *Options) { azure(o); o.Azure.PollInterval = time.Millisecond }, "--azure-poll-interval=1ms"},
		{"front door", func(o *Options) { azure(o); o.Azure.FrontDoorClasses = "afd=Standard, afd-private=Premium" }, ""},
		{"front door without subscription", func(o *Options) { o.Azure.FrontDoorClasses = "afd=Standard" }, `--azure-front-door-classes="afd=Standard" needs --azure-subscription-id`},
		{"front door tier", func(o *Options) { azure(o); o.Azure.FrontDoorClasses = "afd=premium" }, `tier "premium" of afd: want Standard or Premium`},
		{"front door pair", func(o *Options) { azure(o); o.Azure.FrontDoorClasses = "afd" }, `"afd" is not class=tier`},
		{"front door class name", func(o *Options) { azure(o); o.Azure.FrontDoorClasses = "AFD=Standard" }, `GatewayClass "AFD" is not a valid name`},
		{"front door twice", func(o *Options) { azure(o); o.Azure.FrontDoorClasses = "afd=Standard,afd=Premium" }, "GatewayClass afd given twice"},
		{"edge reserved ports", func(o *Options) { o.EdgeReservedPorts = "9090, 9091" }, ""},
		{"edge reserved port out of range", func(o *Options) { o.EdgeReservedPorts = "9090,70000" }, `--edge-reserved-ports="9090,70000": "70000" is not a port`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.edit(&o)
			err := o.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
