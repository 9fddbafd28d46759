package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kvtrail/kvtrail/ingest"
	"github.com/kvtrail/kvtrail/ingest/parse"
)

// newFormatsCmd: `kvtrail formats check PATH…` reads log files the way
// ingest does, without ClickHouse, and reports how each line was
// classified and which shapes are still unknown.
func newFormatsCmd(*app) *cobra.Command {
	c := &cobra.Command{Use: "formats", Short: "Line formats kvtrail recognises"}
	var asJSON bool
	var format, tz string
	check := &cobra.Command{
		Use:   "check PATH...",
		Short: "Classify every line of files (no ClickHouse): counts by family and status, unknown shapes with an example",
		Long: `check reads files, directories, globs, .gz files or - (stdin) exactly as ingest
would and prints, per file, the records by line family and status (parsed,
noise, unknown, malformed) and the unknown lines grouped by shape with one
example each. Nothing is written anywhere. It fails only when a file cannot
be read; a file with no recognised line is reported with a warning.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := parse.ParseOptions{}
			if tz != "" {
				loc, err := time.LoadLocation(tz)
				if err != nil {
					return usageError{fmt.Errorf("--timezone: %w", err)}
				}
				opts.Location = loc
			}
			hint := ingest.NormalizeFormat(format)
			if hint == ingest.FormatAuto {
				hint = ""
			}
			if hint != "" {
				if _, err := parse.New(hint, opts); err != nil {
					return usageError{fmt.Errorf("--format %q: one of auto, mooncake, gateway or %v", format, parse.Formats)}
				}
			}
			var files []string
			for _, a := range args {
				fs, err := ingest.Expand(a)
				if err != nil {
					return usageError{err}
				}
				files = append(files, fs...)
			}
			var reports []parse.CheckReport
			var failed []error
			for _, f := range files {
				rep, err := checkFile(f, hint, opts)
				if err != nil {
					failed = append(failed, err)
					continue
				}
				reports = append(reports, rep)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(struct {
					Files []parse.CheckReport `json:"files"`
				}{reports}); err != nil {
					return err
				}
			} else {
				printCheck(out, reports)
			}
			return errors.Join(failed...)
		},
	}
	check.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	check.Flags().StringVar(&format, "format", "auto", "format hint for every file (tie-break only; lines are classified by their own shape)")
	check.Flags().StringVar(&tz, "timezone", "", "time zone of zone-less timestamps (default UTC)")
	c.AddCommand(check)
	return c
}

func checkFile(path string, hint parse.Format, opts parse.ParseOptions) (parse.CheckReport, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return parse.CheckReport{Path: path}, fmt.Errorf("open %s: %w", path, err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			opts.DefaultTime = st.ModTime()
		}
		r = f
	}
	br := bufio.NewReaderSize(r, 256<<10)
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return parse.CheckReport{Path: path}, fmt.Errorf("gunzip %s: %w", path, err)
		}
		defer gz.Close()
		return parse.Check(path, gz, hint, opts)
	}
	return parse.Check(path, br, hint, opts)
}

func printCheck(w io.Writer, reports []parse.CheckReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tDETECTED\tLINES\tRECORDS\tPARSED\tNOISE\tUNKNOWN\tMALFORMED")
	for _, r := range reports {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", safe(r.Path), r.Detected, r.Lines, r.Records, r.Parsed, r.Noise, r.Unknown, r.Malformed)
	}
	_ = tw.Flush()
	for _, r := range reports {
		fmt.Fprintf(w, "\n== %s\n", safe(r.Path))
		if r.Warning != "" {
			fmt.Fprintf(w, "WARNING: %s\n", r.Warning)
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FAMILY\tKIND\tPARSED\tNOISE\tUNKNOWN\tMALFORMED")
		for _, f := range r.Families {
			fam := f.Family
			if fam == "" {
				fam = "(no known shape)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", fam, f.Kind, f.Parsed, f.Noise, f.Unknown, f.Malformed)
		}
		_ = tw.Flush()
		if len(r.Shapes) == 0 {
			continue
		}
		fmt.Fprintf(w, "unknown shapes (%d):\n", r.UnknownShapes)
		for _, g := range r.Shapes {
			fmt.Fprintf(w, "  %6d  %s\n          e.g. line %d: %s\n", g.Count, safe(g.Shape), g.LineNo, safe(g.Example))
		}
		if r.UnknownShapes > len(r.Shapes) {
			fmt.Fprintf(w, "  … %d more shapes (see --json)\n", r.UnknownShapes-len(r.Shapes))
		}
	}
}

// safe makes log text harmless on a terminal: control characters and
// invalid UTF-8 are escaped, so a log line cannot move the cursor or
// recolour the screen.
func safe(s string) string {
	q := strconv.QuoteToGraphic(s)
	q = q[1 : len(q)-1]
	return strings.ReplaceAll(q, `\"`, `"`)
}

func init() { extraCommands = append(extraCommands, newFormatsCmd) }
