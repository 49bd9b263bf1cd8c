// Package web holds fleetnet-console's web UI: one HTML page, its script
// and its style sheet, written by hand (no build step, no framework) and
// embedded in the binary.
package web

import "embed"

// Assets are the files under assets/.
//
//go:embed assets
var Assets embed.FS
