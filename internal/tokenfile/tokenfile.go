// Package tokenfile reads the bearer-token files of fleetnet's servers (the
// registry's --token-file, fleetnet-discovery's tokens file): CSV lines of
// token,name,role, lines starting with # are comments. Errors name the file,
// the line as an editor counts it (comments included) and the entry's name,
// never the token.
package tokenfile

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
)

// MinLength is the shortest token accepted.
const MinLength = 16

// Entry is one token of a file.
type Entry struct {
	Token, Name, Role string
	// Line is the entry's line in the file, from 1.
	Line int
}

// Load reads path. Every role must be one of roles; a token shorter than
// MinLength, or given twice, is refused rather than one entry silently
// winning over the other, and so is an entry without a name: every
// identity has one, and none is what a server would read as "anyone".
func Load(path string, roles ...string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokens file: %w", err)
	}
	defer f.Close()
	entries, err := Parse(f, roles...)
	if err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return entries, nil
}

// Parse reads a tokens file's content from r (see Load).
func Parse(r io.Reader, roles ...string) ([]Entry, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 3
	cr.Comment = '#'
	var out []Entry
	seen := map[string]int{}
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			// csv's ParseError names the line itself.
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		e := Entry{Token: row[0], Name: row[1], Role: row[2], Line: line}
		switch {
		case strings.TrimSpace(e.Name) == "":
			return nil, fmt.Errorf("line %d: the name is empty: every token names who holds it", line)
		case !slices.Contains(roles, e.Role):
			return nil, fmt.Errorf("line %d (%s): role %q is not one of %s", line, e.Name, e.Role, strings.Join(roles, ", "))
		case len(e.Token) < MinLength:
			return nil, fmt.Errorf("line %d (%s): the token is shorter than %d characters", line, e.Name, MinLength)
		case seen[e.Token] != 0:
			return nil, fmt.Errorf("line %d (%s): the token of line %d is given again", line, e.Name, seen[e.Token])
		}
		seen[e.Token] = line
		out = append(out, e)
	}
}

// DefaultEvery is how often Watch looks at a file.
const DefaultEvery = 10 * time.Second

// Watch reads path every every (DefaultEvery when 0) until ctx ends and,
// when its content changed from what it is when Watch is called and held
// still for one look, calls reload, which reads it again and puts the new tokens in use: a rotated
// Secret takes effect without a restart. A reload that fails is logged;
// the tokens in use stay. Watch returns at once; the watching goes on in
// a goroutine of its own.
func Watch(ctx context.Context, path string, every time.Duration, reload func() error, log *slog.Logger) {
	if every <= 0 {
		every = DefaultEvery
	}
	sum := func() [32]byte {
		b, _ := os.ReadFile(path)
		return sha256.Sum256(b)
	}
	// last is the content in use; seen, the content at the previous look.
	last := sum()
	seen := last
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s := sum()
			if s == last {
				seen = s
				continue
			}
			if s != seen {
				// Changed since the previous look: it may be half written
				// (an editor truncates, then writes; an empty file would
				// load as no tokens at all). Taken once it holds still.
				seen = s
				continue
			}
			if err := reload(); err != nil {
				log.Error("the tokens file changed but does not load; the tokens in use stay", "file", path, "err", err)
				continue
			}
			last = s
			log.Info("tokens file reloaded", "file", path)
		}
	}()
}
