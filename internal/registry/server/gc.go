package server

import (
	"context"
	"time"
)

// collectGarbage removes the records of clusters whose lease expired more
// than the grace period ago. The time a cluster went dead is what this
// replica observed: after a restart the grace period starts again, which
// only ever keeps records longer. It never acts on an unsynced view.
func (r *Registry) collectGarbage(ctx context.Context) {
	interval := min(r.cfg.GracePeriod/4, 10*time.Second)
	interval = max(interval, 10*time.Millisecond)
	ticker := r.cfg.Clock.NewTicker(interval)
	defer ticker.Stop()
	deadSince := map[string]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		r.mu.Lock()
		if !r.synced {
			r.mu.Unlock()
			continue
		}
		dead := r.view.DeadClusters()
		r.mu.Unlock()

		now := r.cfg.Clock.Now()
		still := map[string]time.Time{}
		for _, id := range dead {
			since, ok := deadSince[id]
			if !ok {
				since = now
			}
			if now.Sub(since) < r.cfg.GracePeriod {
				still[id] = since
				continue
			}
			if err := r.removeCluster(ctx, id); err != nil {
				r.log.Error("collecting the records of an expired cluster", "cluster", id, "err", err)
				still[id] = since
				continue
			}
			r.log.Info("collected the records of a cluster whose lease expired", "cluster", id, "deadFor", now.Sub(since))
		}
		deadSince = still
	}
}
