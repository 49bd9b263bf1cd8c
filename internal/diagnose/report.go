package diagnose

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Write prints steps as a list: a mark, the step, what was found and, under
// a step that does not hold, what to do.
func Write(w io.Writer, t Target, steps []Step) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "diagnose %s\n", t)
	for _, s := range steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Status, s.Name, s.Detail)
		if s.Fix != "" && s.Status != OK {
			fmt.Fprintf(tw, "\t\t→ %s\n", s.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
