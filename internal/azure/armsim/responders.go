package armsim

import (
	"context"
	"encoding/json"
	"net/http"

	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
)

// The functions below implement the methods of an SDK fake server (e.g.
// fake.LoadBalancersServer) on the simulation, for the request being
// dispatched (RequestID); wrap turns the resource model into the method's
// response type.

// PutLRO is a Begin*CreateOrUpdate: the operation's first response, or
// its end when it took no poll.
func PutLRO[T, R any](ctx context.Context, s *Sim, body T, wrap func(T) R) (resp azfake.PollerResponder[R], errResp azfake.ErrorResponder) {
	id := s.RequestID()
	b, err := json.Marshal(body)
	if err != nil {
		errResp.SetError(err)
		return
	}
	stored, done, err := s.Put(ctx, id, b)
	if err != nil {
		errResp.SetError(err)
		return
	}
	if done {
		var v T
		if err := json.Unmarshal(stored, &v); err != nil {
			errResp.SetError(err)
			return
		}
		resp.SetTerminalResponse(http.StatusOK, wrap(v), nil)
		return
	}
	resp.AddNonTerminalResponse(http.StatusCreated, nil)
	return
}

// DeleteLRO is a BeginDelete.
func DeleteLRO[R any](ctx context.Context, s *Sim) (resp azfake.PollerResponder[R], errResp azfake.ErrorResponder) {
	done, err := s.Remove(ctx, s.RequestID())
	if err != nil {
		errResp.SetError(err)
		return
	}
	if done {
		var zero R
		resp.SetTerminalResponse(http.StatusOK, zero, nil)
		return
	}
	resp.AddNonTerminalResponse(http.StatusAccepted, nil)
	return
}

// GetResource is a Get.
func GetResource[T, R any](s *Sim, wrap func(T) R) (resp azfake.Responder[R], errResp azfake.ErrorResponder) {
	b, err := s.Read(s.RequestID())
	if err != nil {
		errResp.SetError(err)
		return
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		errResp.SetError(err)
		return
	}
	resp.SetResponse(http.StatusOK, wrap(v), nil)
	return
}

// ListPager is a NewListPager: the resources of the request's collection
// (a type in a resource group, or a child type under a resource) in pages
// of Options.PageSize; page builds one page from its values (the fake
// server sets the next links).
func ListPager[T, P any](s *Sim, page func(values []*T) P) (resp azfake.PagerResponder[P]) {
	coll := s.RequestID()
	parent, ok := coll.Parent()
	if !ok {
		parent = ID{Subscription: coll.Subscription, ResourceGroup: coll.ResourceGroup}
	}
	all := s.ListJSON(parent, coll.Type())
	size := s.pageSize()
	if size <= 0 {
		size = max(len(all), 1)
	}
	for start := 0; start == 0 || start < len(all); start += size {
		var values []*T
		for _, b := range all[start:min(start+size, len(all))] {
			v := new(T)
			if err := json.Unmarshal(b, v); err != nil {
				resp.AddError(err)
				return
			}
			values = append(values, v)
		}
		resp.AddPage(http.StatusOK, page(values), nil)
	}
	return
}
