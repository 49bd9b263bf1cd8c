// Package keys is a small api/keys for docsgen's tests.
package keys

// Things of the widget.
const (
	// AnnotationColour on a widget is its colour; see LabelShape and
	// keys.LabelShape, not other.LabelShape.
	AnnotationColour = "example.dev/" + "colour"
	// LabelShape and LabelSize describe a widget.
	LabelShape = "example.dev/shape"
	LabelSize  = "example.dev/size"

	unexported = "never shown"
)

// ReasonBroken: the widget is <broken> | *very* broken.
const ReasonBroken = "Broken"

// MaxWidgets is how many widgets there may be.
const MaxWidgets = 3 * 4

// Prefixes are refused.
var Prefixes = []string{"example.dev/", "k8s.io/"}
