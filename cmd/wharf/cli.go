package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wharfmq/wharf/client"
)

// cliDefaultBroker is where the client commands connect by default.
const cliDefaultBroker = "127.0.0.1:10911"

// addClientCommands registers the client-side commands: produce, consume,
// query, topic, group.
func addClientCommands(root *cobra.Command) {
	root.AddCommand(newProduceCmd(), newConsumeCmd(), newQueryCmd(), newTopicCmd(), newGroupCmd())
}

// cliCommon holds the flags every client command has.
type cliCommon struct {
	broker   string
	namesrv  string
	json     bool
	timeout  time.Duration
	logLevel string

	cmd *cobra.Command // to tell a given --broker from the default
}

func (c *cliCommon) register(cmd *cobra.Command) {
	f := cmd.Flags()
	c.cmd = cmd
	f.StringVar(&c.broker, "broker", cliDefaultBroker, "broker address host:port (one broker group)")
	f.StringVar(&c.namesrv, "namesrv", "", `name server addresses, ";"-separated ("a:9876;b:9876"): every broker group of the cluster`)
	f.BoolVar(&c.json, "json", false, "print one JSON object as the last line of stdout")
	f.DurationVar(&c.timeout, "timeout", 3*time.Second, "timeout of each request")
	f.StringVar(&c.logLevel, "log-level", "error", "client log level on stderr: debug, info, warn, error")
}

// errBrokerAndNamesrv: a client command told to use one broker and a cluster.
var errBrokerAndNamesrv = errors.New("give --broker (one broker group) or --namesrv (a cluster), not both")

// checkTarget fails when both --broker and --namesrv are given. Without
// either, a command talks to the default broker.
func (c *cliCommon) checkTarget() error {
	if c.namesrv != "" && c.cmd != nil && c.cmd.Flags().Changed("broker") {
		return errBrokerAndNamesrv
	}
	return nil
}

// onCluster reports whether the command goes through name servers.
func (c *cliCommon) onCluster() bool { return c.namesrv != "" }

// needBroker is the error of a mode that reads or changes one broker,
// given --namesrv.
func (c *cliCommon) needBroker(what string) error {
	if c.onCluster() {
		return fmt.Errorf("%s works on one broker: use --broker ADDR instead of --namesrv", what)
	}
	return nil
}

// target is the broker address and options for a client: with --namesrv
// no address and WithNameServer.
func (c *cliCommon) target(stderr io.Writer) (string, []client.Option) {
	opts := c.clientOptions(stderr)
	if c.onCluster() {
		return "", append(opts, client.WithNameServer(c.namesrv))
	}
	return c.broker, opts
}

func (c *cliCommon) clientOptions(stderr io.Writer) []client.Option {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		lvl = slog.LevelError
	}
	return []client.Option{
		client.WithTimeout(c.timeout),
		client.WithLogger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))),
	}
}

// cliSignalContext is cancelled on SIGINT or SIGTERM. After the first
// signal, the stop function is called so that a second one kills the
// process the default way.
func cliSignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// cliErrInterrupted is returned by produce and consume after a signal.
var cliErrInterrupted = errors.New("interrupted")

// cliIsTerminal reports whether w is a character device (a terminal).
func cliIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// cliWriteJSON writes v as one line of JSON.
func cliWriteJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// cliRound rounds x to 3 decimals for reports (NaN and Inf become 0).
func cliRound(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// cliErrorKind names an error for the error counts of a report.
func cliErrorKind(err error) string {
	if st, ok := client.StatusFromError(err); ok {
		return st.String()
	}
	switch {
	case errors.Is(err, client.ErrTimeout):
		return "TIMEOUT"
	case errors.Is(err, client.ErrBrokerUnavailable):
		return "BROKER_UNAVAILABLE"
	case errors.Is(err, client.ErrClosed):
		return "CLOSED"
	case errors.Is(err, context.Canceled):
		return "CANCELLED"
	case errors.Is(err, client.ErrMessageIllegal):
		return "MESSAGE_ILLEGAL"
	}
	return "ERROR"
}

// cliProgress redraws a status line on a terminal about 5 times a second.
type cliProgress struct {
	w    io.Writer
	line func() string
	stop chan struct{}
	done chan struct{}
}

// startCLIProgress starts the progress line if w is a terminal; otherwise it
// returns nil (and the methods of a nil *cliProgress do nothing).
func startCLIProgress(w io.Writer, line func() string) *cliProgress {
	if !cliIsTerminal(w) {
		return nil
	}
	p := &cliProgress{w: w, line: line, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(p.w, "\r\033[K%s", p.line())
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			}
		}
	}()
	return p
}

// Stop ends the progress line and clears it.
func (p *cliProgress) Stop() {
	if p == nil {
		return
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}
