package armsim

import "testing"

// TestServedKinds: every kind the simulation models is served over HTTP
// too (a kind missing from apiTable worked in process and failed the
// simulation served on loopback, which the live e2e program runs against).
func TestServedKinds(t *testing.T) {
	s := New(Options{})
	for typ := range s.kinds {
		if _, ok := apiTable[typ]; !ok {
			t.Errorf("kind %s is modelled but not served: add it to apiTable", typ)
		}
	}
}
