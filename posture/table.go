package posture

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints one row per boot (only each node's latest when
// latestOnly) and, below, each exposed or unknown bug with its sources.
func (f *Fleet) WriteTable(w io.Writer, latestOnly bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tBOOT\tMODE\tVERSION\tPAGE\tPOOL\tCONTEXT\tMAX_REQ_INPUT\tPOOL<CTX\tDEFERRED\tREAD_CHECK\tEXPOSED\tUNKNOWN")
	boots := f.Boots
	if latestOnly {
		boots = f.Latest()
	}
	for _, b := range boots {
		var unk []string
		for _, e := range b.Bugs {
			if e.Status == Unknown {
				unk = append(unk, e.BugID)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Node, b.Role,
			b.BootTS.Format("2006-01-02 15:04:05"), b.PDMode.Value, b.Version.Value, b.PageSize.Value,
			b.PoolTokens.Value, b.ContextLen.Value, b.MaxReqInputLen.Value, b.PoolBelowContext.Value,
			b.DeferredRelease.Value, b.ReadCheck.Value, dash(strings.Join(b.Exposed(), ",")), dash(strings.Join(unk, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, bug := range f.Bugs {
		fmt.Fprintf(w, "%s  %s\n  fix: %s\n", bug.ID, bug.Title, bug.FixStatus)
		for _, s := range bug.Sources {
			fmt.Fprintf(w, "  %s\n", s.URL)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
