package armsim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/fleetnet/fleetnet/internal/azure/armsim"
)

// A create past a Front Door limit of the profile's tier is refused with
// 400 ResourceQuotaExceeded; up to the limit, and updates at the limit,
// are accepted; the count is per profile (or per parent).
func TestFrontDoorLimits(t *testing.T) {
	body := map[string]string{
		armsim.TypeOriginGroup:  `{"properties":{}}`,
		armsim.TypeOrigin:       `{"properties":{"hostName":"203.0.113.1"}}`,
		armsim.TypeRuleSet:      `{"properties":{}}`,
		armsim.TypeRule:         `{"properties":{"order":1}}`,
		armsim.TypeCustomDomain: `{"properties":{"hostName":"a.example.com"}}`,
	}
	for _, tc := range []struct {
		name string
		sku  string
		typ  string // created under the profile, or under parent
		// parentType, when set, creates every resource under one parent.
		parentType string
		max        int
	}{
		{name: "origin groups Standard", sku: "Standard_AzureFrontDoor", typ: armsim.TypeOriginGroup, max: 100},
		{name: "origin groups Premium", sku: "Premium_AzureFrontDoor", typ: armsim.TypeOriginGroup, max: 200},
		{name: "custom domains Standard", sku: "Standard_AzureFrontDoor", typ: armsim.TypeCustomDomain, max: 100},
		{name: "rule sets Standard", sku: "Standard_AzureFrontDoor", typ: armsim.TypeRuleSet, max: 100},
		{name: "origins per origin group", sku: "Premium_AzureFrontDoor", typ: armsim.TypeOrigin, parentType: armsim.TypeOriginGroup, max: 50},
		{name: "rules per rule set", sku: "Premium_AzureFrontDoor", typ: armsim.TypeRule, parentType: armsim.TypeRuleSet, max: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := armsim.New(armsim.Options{})
			ctx := context.Background()
			put := func(id armsim.ID, b string) error { _, err := s.PutSync(ctx, id, []byte(b)); return err }
			prof := armsim.ResourceID(sub, rg, armsim.TypeProfile, "afd")
			if err := put(prof, fmt.Sprintf(`{"location":"Global","sku":{"name":%q}}`, tc.sku)); err != nil {
				t.Fatal(err)
			}
			// A second profile's resources do not count.
			other := armsim.ResourceID(sub, rg, armsim.TypeProfile, "other")
			if err := put(other, fmt.Sprintf(`{"location":"Global","sku":{"name":%q}}`, tc.sku)); err != nil {
				t.Fatal(err)
			}
			parent, otherParent := prof, other
			if tc.parentType != "" {
				seg := tc.parentType[len(armsim.TypeProfile)+1:]
				parent, otherParent = prof.Child(seg, "p"), prof.Child(seg, "q")
				for _, p := range []armsim.ID{parent, otherParent} {
					if err := put(p, body[tc.parentType]); err != nil {
						t.Fatal(err)
					}
				}
			}
			seg := tc.typ[len(tc.typ)-len(lastSegment(tc.typ)):]
			if err := put(otherParent.Child(seg, "x0"), body[tc.typ]); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tc.max; i++ {
				if err := put(parent.Child(seg, fmt.Sprintf("r%d", i)), body[tc.typ]); err != nil {
					t.Fatalf("create %d of %d: %v", i+1, tc.max, err)
				}
			}
			// An update at the limit adds nothing.
			if err := put(parent.Child(seg, "r0"), body[tc.typ]); err != nil {
				t.Fatalf("update at the limit: %v", err)
			}
			err := put(parent.Child(seg, "over"), body[tc.typ])
			var ae *armsim.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code != "ResourceQuotaExceeded" {
				t.Fatalf("create past %d: %v, want 400 ResourceQuotaExceeded", tc.max, err)
			}
		})
	}
}

func lastSegment(typ string) string {
	for i := len(typ) - 1; i >= 0; i-- {
		if typ[i] == '/' {
			return typ[i+1:]
		}
	}
	return typ
}
