package proxy

import "time"

// SetNow makes p read the time of passive ejections from now, so that a
// test decides when an ejection ends. Call it before the first Apply.
func SetNow(p *Proxy, now func() time.Time) { p.health.SetNow(now) }
