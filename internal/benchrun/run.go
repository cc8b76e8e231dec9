package benchrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// clientGCPercent is the GOGC of the process running the bench's clients,
// unless the environment sets one. Their live heap is a few MiB, so with
// Go's default of 100 the collector ran twenty times a second at 10,000
// msg/s and its pauses and mark work landed in the measured latencies.
// bench/ gives the JetStream clients the same setting, so the comparison
// stays even.
const clientGCPercent = 400

func tuneClientGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(clientGCPercent)
	}
}

// Run runs the scenarios of o, each at each of its sizes, and writes the
// results to stdout (as JSON lines while they come with o.JSON, else as a
// table at the end); progress and per-scenario failures go to stderr. It
// returns every result, and an error if o is invalid or any scenario
// failed. When ctx ends it stops after the scenario under way, writes what
// it has and returns ctx's error.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) ([]Result, error) {
	if err := o.resolve(); err != nil {
		return nil, err
	}
	tuneClientGC()
	var results []Result
	var failures []string
	for _, sc := range o.Scenarios {
		sizes := o.Sizes
		if sc == "disk-probe" {
			sizes = []int{0}
		}
		for _, size := range sizes {
			if ctx.Err() != nil {
				break
			}
			rs, err := runScenario(ctx, &o, sc, size, stderr)
			for _, r := range rs {
				results = append(results, r)
				if o.JSON {
					_ = writeJSON(stdout, r)
				}
			}
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s/%d: %v", sc, size, err))
				fmt.Fprintf(stderr, "bench %s size %d: %v\n", sc, size, err)
			}
		}
	}
	if !o.JSON {
		writeTable(stdout, results)
	}
	if o.Report != "" && len(results) > 0 {
		lines := []string{time.Now().UTC().Format("2006-01-02 15:04 UTC") + ", " + machineLine(),
			"command: " + strings.Join(os.Args, " ")}
		if err := WriteReport(o.Report, "wharf bench", lines, []Labelled{{Results: results}}); err != nil {
			failures = append(failures, "--"+err.Error())
		} else {
			fmt.Fprintf(stderr, "bench: report written to %s\n", o.Report)
		}
	}
	if err := ctx.Err(); err != nil {
		return results, err
	}
	if len(failures) > 0 {
		return results, fmt.Errorf("%d scenario(s) failed: %s", len(failures), strings.Join(failures, "; "))
	}
	return results, nil
}

// progress starts o.Progress's status line, if any, and returns what ends it.
func (o *Options) progress(line func() string) (stop func()) {
	if o.Progress == nil {
		return func() {}
	}
	return o.Progress(line)
}

// machineLine describes where the bench ran, for the report.
func machineLine() string {
	return fmt.Sprintf("%d CPUs, %s, %s/%s", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
