// Package subscribe is the edge's side of the fleetnet.edge.v1 stream: it
// receives models from fleetnet-gateway, hands each to the data plane,
// acknowledges the outcome, and keeps the last good model on disk so that a
// restarted edge serves it before (and without) the gateway.
package subscribe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	edgev1 "github.com/fleetnet/fleetnet/api/edge/v1"
	"github.com/fleetnet/fleetnet/internal/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Apply hands a model to the data plane. An error refuses it whole: the
// data plane must then go on serving what it served before. Refusals
// with no error are the parts of the model the data plane could not serve
// alone (a listener or port it cannot bind) and serves it without; the
// acknowledgement names them, so that one object's part never stops the
// others.
type Apply func(ctx context.Context, update *edgev1.ModelUpdate) ([]*edgev1.Refusal, error)

// Client subscribes to the models of one gateway.
type Client struct {
	Conn   grpc.ClientConnInterface
	Region string
	// StateDir keeps the last good model; empty keeps nothing.
	StateDir string
	Apply    Apply
	Log      *slog.Logger
	// RetryMax bounds the wait between reconnects (default 1s, as the
	// registry client: a gateway back after an outage is found at once).
	RetryMax time.Duration

	mu      sync.Mutex
	serving *edgev1.ModelUpdate
	// refused are the parts of serving the data plane serves it without.
	refused []*edgev1.Refusal
}

const stateFile = "model.pb"

// Restore applies the model kept in StateDir, if any, and reports whether
// there was one.
func (c *Client) Restore(ctx context.Context) (bool, error) {
	if c.StateDir == "" {
		return false, nil
	}
	data, err := os.ReadFile(filepath.Join(c.StateDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reading the last good model: %w", err)
	}
	update := &edgev1.ModelUpdate{}
	if err := proto.Unmarshal(data, update); err != nil {
		return false, fmt.Errorf("decoding the last good model %s: %w", filepath.Join(c.StateDir, stateFile), err)
	}
	refused, err := c.Apply(ctx, update)
	if err != nil {
		return false, fmt.Errorf("applying the last good model (version %d): %w", update.GetVersion(), err)
	}
	c.setServing(update, refused)
	c.log().Info("serving the last good model from the state directory", "version", update.GetVersion())
	c.logRefused(update, refused)
	return true, nil
}

// Serving returns the model served now, nil before the first.
func (c *Client) Serving() *edgev1.ModelUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serving
}

// Refused are the parts of the model served now that the data plane
// serves it without.
func (c *Client) Refused() []*edgev1.Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refused
}

func (c *Client) setServing(u *edgev1.ModelUpdate, refused []*edgev1.Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.serving, c.refused = u, refused
}

func (c *Client) logRefused(u *edgev1.ModelUpdate, refused []*edgev1.Refusal) {
	for _, r := range refused {
		c.log().Error("serving the model without a part the edge cannot serve", "version", u.GetVersion(), "kind", r.GetKind(),
			"object", r.GetNamespace()+"/"+r.GetName(), "listener", r.GetListener(), "port", r.GetPort(), "protocol", r.GetProtocol(), "reason", r.GetReason())
	}
}

func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// Run keeps a stream open until ctx ends, reconnecting after failures. A
// gateway that is away is waited for, not an error: the edge keeps serving.
func (c *Client) Run(ctx context.Context) error {
	retryMax := c.RetryMax
	if retryMax <= 0 {
		retryMax = time.Second
	}
	wait := 50 * time.Millisecond
	for {
		started := time.Now()
		err := c.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) > retryMax {
			wait = 50 * time.Millisecond // the stream worked for a while
		}
		if status.Code(err) == codes.FailedPrecondition {
			// Refused for its version (api/skew): no retry mends that,
			// an upgrade does; the edge keeps serving meanwhile.
			c.log().Error("the gateway refuses this edge's version; keeps serving the last good model", "err", err, "retryIn", retryMax)
			wait = retryMax
		} else {
			c.log().Info("gateway stream ended; keeps serving the last good model and reconnects", "err", err, "retryIn", wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(wait*2, retryMax)
	}
}

func (c *Client) stream(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := edgev1.NewModelDistributionClient(c.Conn).Stream(ctx, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("opening the stream: %w", err)
	}
	hello := &edgev1.Hello{Region: c.Region, Version: version.Get().Version}
	if cur := c.Serving(); cur != nil {
		hello.ServingVersion, hello.ServingHash, hello.Refused = cur.GetVersion(), cur.GetHash(), c.Refused()
	}
	if err := s.Send(&edgev1.EdgeMessage{Message: &edgev1.EdgeMessage_Hello{Hello: hello}}); err != nil {
		return fmt.Errorf("sending hello: %w", err)
	}
	for {
		update, err := s.Recv()
		if err != nil {
			return err
		}
		ack := &edgev1.Ack{Version: update.GetVersion(), Ok: true}
		if refused, err := c.Apply(ctx, update); err != nil {
			ack.Ok, ack.Error = false, err.Error()
			c.log().Error("refused model", "version", update.GetVersion(), "err", err)
		} else {
			ack.Refused = refused
			c.setServing(update, refused)
			if err := c.persist(update); err != nil {
				// Serving is what counts; a restart without the file waits for the gateway.
				c.log().Error("keeping the last good model failed", "version", update.GetVersion(), "err", err)
			}
			c.log().Info("serving model", "version", update.GetVersion(), "refusedParts", len(refused))
			c.logRefused(update, refused)
		}
		if err := s.Send(&edgev1.EdgeMessage{Message: &edgev1.EdgeMessage_Ack{Ack: ack}}); err != nil {
			return fmt.Errorf("acknowledging version %d: %w", update.GetVersion(), err)
		}
	}
}

// persist writes the model atomically: a crash leaves the old file or the new.
func (c *Client) persist(u *edgev1.ModelUpdate) error {
	if c.StateDir == "" {
		return nil
	}
	data, err := proto.Marshal(u)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(c.StateDir, stateFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(c.StateDir, stateFile))
}
