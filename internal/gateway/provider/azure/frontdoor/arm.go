package frontdoor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// meta is what every Front Door resource says of itself.
type meta struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	Location   string             `json:"location"`
	Tags       map[string]*string `json:"tags"`
	Properties struct {
		ProvisioningState     string `json:"provisioningState"`
		DeploymentStatus      string `json:"deploymentStatus"`
		HostName              string `json:"hostName"`
		DomainValidationState string `json:"domainValidationState"`
		ValidationProperties  *struct {
			ValidationToken string `json:"validationToken"`
		} `json:"validationProperties"`
		SharedPrivateLinkResource *struct {
			PrivateLink *struct {
				ID string `json:"id"`
			} `json:"privateLink"`
			Status string `json:"status"`
		} `json:"sharedPrivateLinkResource"`
	} `json:"properties"`
}

func metaOf(v any) meta {
	var m meta
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		return m
	}
	b, err := json.Marshal(v)
	if err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// serviceField says whether k (at path) is filled in by the service or
// kept apart (tags): the provider never sets those through diff.
func serviceField(path, k string) bool {
	switch path {
	case "":
		return k == "id" || k == "name" || k == "type" || k == "systemData" || k == "etag" || k == "tags"
	case "properties":
		return k == "provisioningState" || k == "deploymentStatus"
	}
	return false
}

// diff lists the paths where got differs from want, comparing only what
// want sets (so that what Azure fills in never causes a write): objects
// by want's keys, arrays element by element, strings that are resource
// ids or locations without case.
func diff(want, got any) []string {
	w, g := toJSON(want), toJSON(got)
	var out []string
	var walk func(path string, w, g any)
	walk = func(path string, w, g any) {
		switch wv := w.(type) {
		case map[string]any:
			gv, _ := g.(map[string]any)
			keys := make([]string, 0, len(wv))
			for k := range wv {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if serviceField(path, k) {
					continue
				}
				var gk any
				if gv != nil {
					gk = gv[k]
				}
				walk(strings.TrimPrefix(path+"."+k, "."), wv[k], gk)
			}
		case []any:
			gv, _ := g.([]any)
			if len(gv) != len(wv) {
				out = append(out, path)
				return
			}
			for i := range wv {
				walk(fmt.Sprintf("%s[%d]", path, i), wv[i], gv[i])
			}
		case string:
			gs, _ := g.(string)
			if wv != gs && !(strings.EqualFold(wv, gs) && (strings.HasPrefix(wv, "/subscriptions/") || strings.HasSuffix(path, "location"))) {
				out = append(out, path)
			}
		case nil:
		default:
			if !reflect.DeepEqual(w, g) {
				out = append(out, path)
			}
		}
	}
	walk("", w, g)
	return out
}

func toJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
