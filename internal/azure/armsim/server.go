package armsim

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// The simulation served as ARM's REST API over HTTPS, for programs that
// reach Azure through a URL rather than an in-process transport (the
// Front Door end-to-end check, a gateway run as its own process): they
// are pointed at Server.URL with arm.ClientOptions.Cloud and trust
// Server's CA (SSL_CERT_FILE, or a pool in their transport). azcore's
// bearer token policy refuses to send a token over plain HTTP, which is
// why this is HTTPS.
//
// Requests go through the same fake servers as the in-process
// Transport, which find the SDK method of a request in its context: the
// server derives it from the method and the resource type (apiTable), as
// ARM routes a request by its path. Long-running operations are answered
// as ARM answers them [ARM-ASYNC]: 201 (PUT) or 202 (DELETE) with an
// Azure-AsyncOperation URL, whose GET says {"status": "InProgress" |
// "Succeeded" | "Failed", "error": {...}}; so a client polls with the
// SDK's own Azure-AsyncOperation poller, not the fake poller.
//
// Beside the resource providers the simulation registers, the server
// keeps resource groups (Microsoft.Resources) [ARM-RG] and role
// assignments (Microsoft.Authorization) [ARM-RA] as records: created,
// read and deleted, without permissions being enforced (undocumented
// here: the simulation authorizes every request; it does not read the
// bearer token).
//
// Sources:
//
//	[ARM-ASYNC] Track asynchronous Azure operations,
//	            https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations
//	[ARM-RG]    Resource Groups - Create Or Update / Delete / Check Existence,
//	            https://learn.microsoft.com/rest/api/resources/resource-groups
//	[ARM-RA]    Role Assignments - Create,
//	            https://learn.microsoft.com/rest/api/authorization/role-assignments/create

// Server is a simulation served over HTTPS.
type Server struct {
	// URL is the ARM endpoint, https://127.0.0.1:port.
	URL string
	sim *Sim
	srv *http.Server
	ln  net.Listener

	mu     sync.Mutex
	groups map[string][]byte // resource group key -> JSON
	roles  map[string][]byte // role assignment id (lowercase) -> JSON
}

// Serve serves s as ARM on addr (e.g. 127.0.0.1:0) with cert, until
// Close.
func Serve(s *Sim, addr string, cert tls.Certificate) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("armsim: listening on %s: %w", addr, err)
	}
	srv := &Server{URL: "https://" + ln.Addr().String(), sim: s, ln: ln, groups: map[string][]byte{}, roles: map[string][]byte{}}
	srv.srv = &http.Server{Handler: srv, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.srv.ServeTLS(ln, "", "") }()
	return srv, nil
}

// Close stops serving.
func (srv *Server) Close() error { return srv.srv.Close() }

// ResourceGroup is the stored resource group name of subscription sub, if any.
func (srv *Server) ResourceGroup(sub, name string) (json.RawMessage, bool) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	b, ok := srv.groups[strings.ToLower(sub+"/"+name)]
	return b, ok
}

// RoleAssignments are the stored role assignments' JSON.
func (srv *Server) RoleAssignments() []json.RawMessage {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	var out []json.RawMessage
	for _, b := range srv.roles {
		out = append(out, b)
	}
	return out
}

// opSuffix ends the Azure-AsyncOperation URL the server hands out: the
// resource's path, then the operation's kind (put or delete), so that a
// poll names the SDK method that began it (faults match on it).
const opSuffix = "/armsimOperations/"

func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if i := strings.Index(path, opSuffix); i >= 0 {
		srv.serveOperation(w, r, path[:i], path[i+len(opSuffix):])
		return
	}
	if sub, rg, ok := resourceGroupPath(path); ok {
		srv.serveResourceGroup(w, r, sub, rg)
		return
	}
	if strings.Contains(strings.ToLower(path), "/providers/microsoft.authorization/roleassignments/") {
		srv.serveRoleAssignment(w, r, path)
		return
	}
	api, ok := apiFor(r.Method, pageSuffix.ReplaceAllString(path, ""))
	if !ok {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "InvalidResourceType",
			Message: fmt.Sprintf("The simulation does not serve %s %s.", r.Method, path)})
		return
	}
	resp, err := srv.forward(r, api, path)
	if err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Code: "InternalServerError", Message: err.Error()})
		return
	}
	defer func() { _ = resp.Body.Close() }()
	if status := resp.Header.Get(fakePollerStatus); status != "" {
		resp.Header.Del(fakePollerStatus)
		if status == "InProgress" {
			kind := "put"
			if r.Method == http.MethodDelete {
				kind = "delete"
			}
			resp.Header.Set("Azure-AsyncOperation", srv.URL+path+opSuffix+kind+"?"+r.URL.RawQuery)
		}
	}
	copyResponse(w, resp)
}

// fakePollerStatus is the header the SDK's fake servers mark a
// long-running operation's responses with.
const fakePollerStatus = "Fake-Poller-Status"

// forward hands r to the simulation's transport as the SDK method api,
// the URL made absolute so that the fake pager's next links point back
// here.
func (srv *Server) forward(r *http.Request, api, path string) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	ctx := context.WithValue(r.Context(), runtime.CtxAPINameKey{}, api)
	u := &url.URL{Scheme: "https", Host: r.Host, Path: path, RawQuery: r.URL.RawQuery}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	return srv.sim.Transport().Do(req)
}

// serveOperation answers a GET of an Azure-AsyncOperation URL with the
// operation's status [ARM-ASYNC].
func (srv *Server) serveOperation(w http.ResponseWriter, r *http.Request, path, kind string) {
	id, err := ParseID(path)
	if err != nil {
		writeError(w, &Error{Status: http.StatusBadRequest, Code: "InvalidOperationId", Message: err.Error()})
		return
	}
	method := http.MethodPut
	if kind == "delete" {
		method = http.MethodDelete
	}
	api, _ := apiFor(method, path)
	// The simulation's transport answers polls of the fake poller's
	// status URL from its state: the same answer, reshaped.
	resp, err := srv.forward(r, api, id.String()+pollSuffix)
	if err != nil {
		writeError(w, &Error{Status: http.StatusInternalServerError, Code: "InternalServerError", Message: err.Error()})
		return
	}
	defer func() { _ = resp.Body.Close() }()
	status := resp.Header.Get(fakePollerStatus)
	if status == "" { // an error (a fault, or no such operation)
		copyResponse(w, resp)
		return
	}
	out := map[string]any{"status": status}
	if status == StateFailed {
		var failed struct {
			Error map[string]any `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&failed)
		out["error"] = failed.Error
	}
	writeJSON(w, http.StatusOK, out)
}

// resourceGroupPath matches /subscriptions/{sub}/resourcegroups/{rg}.
func resourceGroupPath(path string) (sub, rg string, ok bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 4 || !strings.EqualFold(parts[0], "subscriptions") || !strings.EqualFold(parts[2], "resourceGroups") {
		return "", "", false
	}
	return parts[1], parts[3], true
}

// serveResourceGroup creates (201, or 200 when it existed), reads,
// checks (HEAD: 204 or 404) and deletes resource groups [ARM-RG]; a
// deletion removes every resource in the group with it, at once
// (undocumented: ARM's deletion is a long-running operation whose
// length the simulation does not model).
func (srv *Server) serveResourceGroup(w http.ResponseWriter, r *http.Request, sub, rg string) {
	key := strings.ToLower(sub + "/" + rg)
	id := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s", sub, rg)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	cur, exists := srv.groups[key]
	notFound := &Error{Status: http.StatusNotFound, Code: "ResourceGroupNotFound", Message: fmt.Sprintf("Resource group '%s' could not be found.", rg)}
	switch r.Method {
	case http.MethodHead:
		if exists {
			w.WriteHeader(http.StatusNoContent)
		} else {
			w.WriteHeader(http.StatusNotFound)
		}
	case http.MethodGet:
		if !exists {
			writeError(w, notFound)
			return
		}
		writeRaw(w, http.StatusOK, cur)
	case http.MethodPut:
		var in struct {
			Location string            `json:"location"`
			Tags     map[string]string `json:"tags"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Location == "" {
			writeError(w, badRequest("LocationRequired", "The location property is required for this definition."))
			return
		}
		b, _ := json.Marshal(map[string]any{"id": id, "name": rg, "type": "Microsoft.Resources/resourceGroups", "location": NormalizeLocation(in.Location),
			"tags": in.Tags, "properties": map[string]any{"provisioningState": StateSucceeded}})
		srv.groups[key] = b
		status := http.StatusCreated
		if exists {
			status = http.StatusOK
		}
		writeRaw(w, status, b)
	case http.MethodDelete:
		if !exists {
			writeError(w, notFound)
			return
		}
		delete(srv.groups, key)
		srv.sim.deleteGroup(sub, rg)
		w.WriteHeader(http.StatusOK)
	default:
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed", Message: r.Method + " is not served on resource groups."})
	}
}

// serveRoleAssignment creates (201) and reads role assignments by id
// [ARM-RA]: properties.roleDefinitionId and principalId are required.
// Undocumented here: the 409 RoleAssignmentExists ARM answers for the
// same principal, role and scope under another name is not modelled.
func (srv *Server) serveRoleAssignment(w http.ResponseWriter, r *http.Request, path string) {
	key := strings.ToLower(path)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		b, ok := srv.roles[key]
		if !ok {
			writeError(w, &Error{Status: http.StatusNotFound, Code: "RoleAssignmentNotFound", Message: "The role assignment '" + path + "' is not found."})
			return
		}
		writeRaw(w, http.StatusOK, b)
	case http.MethodPut:
		var in struct {
			Properties struct {
				RoleDefinitionID string `json:"roleDefinitionId"`
				PrincipalID      string `json:"principalId"`
				PrincipalType    string `json:"principalType"`
			} `json:"properties"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Properties.RoleDefinitionID == "" || in.Properties.PrincipalID == "" {
			writeError(w, badRequest("InvalidRoleAssignmentRequest", "properties.roleDefinitionId and properties.principalId are required.")) // simulated code
			return
		}
		name := path[strings.LastIndex(path, "/")+1:]
		scope := path[:strings.Index(strings.ToLower(path), "/providers/microsoft.authorization/")]
		b, _ := json.Marshal(map[string]any{"id": path, "name": name, "type": "Microsoft.Authorization/roleAssignments",
			"properties": map[string]any{"roleDefinitionId": in.Properties.RoleDefinitionID, "principalId": in.Properties.PrincipalID,
				"principalType": in.Properties.PrincipalType, "scope": scope}})
		srv.roles[key] = b
		writeRaw(w, http.StatusCreated, b)
	default:
		writeError(w, &Error{Status: http.StatusMethodNotAllowed, Code: "MethodNotAllowed", Message: r.Method + " is not served on role assignments."})
	}
}

// deleteGroup removes every resource of resource group rg.
func (s *Sim) deleteGroup(sub, rg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, r := range s.resources {
		if strings.EqualFold(r.id.Subscription, sub) && strings.EqualFold(r.id.ResourceGroup, rg) {
			delete(s.resources, key)
			delete(s.ops, key)
		}
	}
}

// apiMethods are the SDK methods of one resource type, by what a request
// does.
type apiMethods struct {
	client                  string
	get, list, put, delete_ string
}

// apiTable maps a resource type (lowercase, without its namespace's
// parents) to the SDK methods of its client, as the fake servers the
// simulation mounts name them.
var apiTable = map[string]apiMethods{
	"microsoft.cdn/profiles":                                           {"ProfilesClient", "Get", "NewListByResourceGroupPager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/afdendpoints":                              {"AFDEndpointsClient", "Get", "NewListByProfilePager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/afdendpoints/routes":                       {"RoutesClient", "Get", "NewListByEndpointPager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/origingroups":                              {"AFDOriginGroupsClient", "Get", "NewListByProfilePager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/origingroups/origins":                      {"AFDOriginsClient", "Get", "NewListByOriginGroupPager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/rulesets":                                  {"RuleSetsClient", "Get", "NewListByProfilePager", "Create", "BeginDelete"},
	"microsoft.cdn/profiles/rulesets/rules":                            {"RulesClient", "Get", "NewListByRuleSetPager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/securitypolicies":                          {"SecurityPoliciesClient", "Get", "NewListByProfilePager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/customdomains":                             {"AFDCustomDomainsClient", "Get", "NewListByProfilePager", "BeginCreate", "BeginDelete"},
	"microsoft.cdn/profiles/secrets":                                   {"SecretsClient", "Get", "NewListByProfilePager", "BeginCreate", "BeginDelete"},
	"microsoft.network/loadbalancers":                                  {"LoadBalancersClient", "Get", "NewListPager", "BeginCreateOrUpdate", "BeginDelete"},
	"microsoft.network/publicipaddresses":                              {"PublicIPAddressesClient", "Get", "NewListPager", "BeginCreateOrUpdate", "BeginDelete"},
	"microsoft.network/privatelinkservices":                            {"PrivateLinkServicesClient", "Get", "NewListPager", "BeginCreateOrUpdate", ""},
	"microsoft.network/frontdoorwebapplicationfirewallpolicies":        {"PoliciesClient", "Get", "", "BeginCreateOrUpdate", "BeginDelete"},
	"microsoft.network/privatelinkservices/privateendpointconnections": {"PrivateLinkServicesClient", "", "", "UpdatePrivateEndpointConnection", ""},
}

// apiFor is the SDK method a request to path with method names.
func apiFor(method, path string) (string, bool) {
	id, err := ParseID(path)
	if err != nil || id.Namespace == "" {
		return "", false
	}
	m, ok := apiTable[strings.ToLower(id.Type())]
	if !ok {
		return "", false
	}
	var name string
	switch {
	case method == http.MethodGet && id.Name() == "":
		name = m.list
	case method == http.MethodGet:
		name = m.get
	case method == http.MethodPut:
		name = m.put
	case method == http.MethodDelete:
		name = m.delete_
	}
	if name == "" {
		return "", false
	}
	return m.client + "." + name, true
}

func copyResponse(w http.ResponseWriter, resp *http.Response) {
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
