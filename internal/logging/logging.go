// Package logging gives every fleetnet binary the same two logging flags,
// --log-level and --log-format, and the slog logger they describe.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"
)

// Formats of --log-format.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// Options are the logging flags.
type Options struct {
	// Level is debug, info, warn or error.
	Level string
	// Format is json (one object a line, for log collectors) or text
	// (key=value, for a terminal).
	Format string
}

// BindFlags adds --log-level and --log-format to fs, with the defaults of
// a server: info, as JSON lines.
func (o *Options) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "least severe level logged: debug, info, warn or error")
	fs.StringVar(&o.Format, "log-format", FormatJSON, "log line format: json or text")
}

// Validate names the flag and value that cannot be used.
func (o Options) Validate() error {
	if _, err := o.level(); err != nil {
		return err
	}
	switch o.Format {
	case FormatJSON, FormatText:
		return nil
	}
	return fmt.Errorf("--log-format=%s: must be %s or %s", o.Format, FormatJSON, FormatText)
}

func (o Options) level() (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(o.Level) {
	case "debug":
		l = slog.LevelDebug
	case "info", "":
		l = slog.LevelInfo
	case "warn", "warning":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return 0, fmt.Errorf("--log-level=%s: must be debug, info, warn or error", o.Level)
	}
	return l, nil
}

// New returns the logger the options describe, writing to w.
func (o Options) New(w io.Writer) (*slog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	l, _ := o.level()
	ho := &slog.HandlerOptions{Level: l}
	if o.Format == FormatText {
		return slog.New(slog.NewTextHandler(w, ho)), nil
	}
	return slog.New(slog.NewJSONHandler(w, ho)), nil
}
