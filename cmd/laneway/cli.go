package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/app"
)

// env is where client commands read LANEWAY_* variables; tests replace it.
var getenv = os.Getenv

// envOverrides are flags whose variable is not envName(flag): the client's
// --token is the same secret as serve's --admin-token.
var envOverrides = map[string]string{"token": "LANEWAY_ADMIN_TOKEN", "o": "LANEWAY_OUTPUT"}

// clientEnvFlags are the flags of client commands that read the
// environment; a command's own flags (--tenant, --url, …) do not, so that a
// stray LANEWAY_URL cannot change what a command does.
var clientEnvFlags = map[string]bool{"api": true, "token": true, "o": true, "timeout": true}

// feedTokenEnv holds a feed consumer's token: a variable of its own, so
// that a shell holding the admin token never sends it to a feed, nor a
// consumer token to the admin API.
const feedTokenEnv = "LANEWAY_FEED_TOKEN"

// envOf names the variable a flag reads, or "" when it reads none.
type envOf func(flagName string) string

// cliEnvName is the client's variable of any flag (the demo binds all).
func cliEnvName(flagName string) string {
	if v, ok := envOverrides[flagName]; ok {
		return v
	}
	return envName(flagName)
}

// clientEnv is envOf for the admin API's commands.
func clientEnv(flagName string) string {
	if !clientEnvFlags[flagName] {
		return ""
	}
	return cliEnvName(flagName)
}

// consumerEnv is envOf for the commands that read a feed.
func consumerEnv(flagName string) string {
	if flagName == "token" {
		return feedTokenEnv
	}
	return clientEnv(flagName)
}

// applyCLIEnv is applyEnv with the variable names env gives.
func applyCLIEnv(fs *flag.FlagSet, getenv func(string) string, env envOf) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := env(f.Name)
		if name == "" {
			return
		}
		if v := getenv(name); v != "" && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", name, e)
			}
		}
	})
	return err
}

// printCLIDefaults is printDefaults with the variable names env gives and
// the positional arguments a command takes.
func printCLIDefaults(fs *flag.FlagSet, w io.Writer, synopsis, about string, env envOf) {
	fmt.Fprintf(w, "Usage: laneway %s\n\n", synopsis)
	if about != "" {
		fmt.Fprintf(w, "%s\n\n", about)
	}
	fmt.Fprintf(w, "Flags showing an environment variable can also be set through it.\n\n")
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		variable := ""
		if name := env(f.Name); name != "" {
			variable = "env " + name + ", "
		}
		fmt.Fprintf(w, "  %s%s (%sdefault %s)\n      %s\n", dash, f.Name, variable, def, f.Usage)
	})
}

// clientFlags are the flags every API client command takes.
type clientFlags struct {
	api     string
	token   string
	output  string
	timeout time.Duration
}

// bind binds the flags and returns where they read the environment. A
// consumer reads a feed: its --token is the endpoint's consumer token, and
// it prints JSON lines, so it has no -o.
func (c *clientFlags) bind(fs *flag.FlagSet, consumer bool) envOf {
	fs.StringVar(&c.api, "api", "http://"+app.DefaultHTTPAddr, "address of the Laneway API")
	fs.DurationVar(&c.timeout, "timeout", client.DefaultTimeout, "limit on each API request")
	if consumer {
		fs.StringVar(&c.token, "token", "", "the endpoint's lwf_ consumer token (laneway endpoints feed-tokens create), not the admin token")
		c.output = "json"
		return consumerEnv
	}
	fs.StringVar(&c.token, "token", "", "admin bearer token (serve's --admin-token)")
	fs.StringVar(&c.output, "o", "table", "output: table (aligned columns) or json (the API's JSON, one document)")
	return clientEnv
}

func (c *clientFlags) client() (*client.Client, error) {
	if c.output != "table" && c.output != "json" {
		return nil, fmt.Errorf("-o must be table or json, not %q", c.output)
	}
	return client.New(c.api, c.token, client.WithTimeout(c.timeout))
}

func (c *clientFlags) json() bool { return c.output == "json" }

// command is one client subcommand: its flags, how it is called, and what it does.
type command struct {
	name     string // e.g. "endpoints list"
	synopsis string // after "laneway ": "endpoints get <id> [flags]"
	about    string
	args     int // exact positional arguments; -1 for any
	// consumer marks a command that reads a feed (see clientFlags.bind).
	consumer bool
	flags    func(fs *flag.FlagSet)
	run      func(ctx context.Context, io cmdIO, args []string) error
}

// cmdIO is what a command works with once its flags are parsed.
type cmdIO struct {
	c      *client.Client
	flags  *clientFlags
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// exec parses the command's flags (and LANEWAY_* variables) and runs it.
func (cmd *command) exec(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := &clientFlags{}
	env := cf.bind(fs, cmd.consumer)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	fs.Usage = func() { printCLIDefaults(fs, stderr, cmd.synopsis, cmd.about, env) }
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the usage is printed
	}
	if err != nil {
		return err
	}
	if err := applyCLIEnv(fs, getenv, env); err != nil {
		return err
	}
	if cmd.args >= 0 && len(pos) != cmd.args {
		return fmt.Errorf("usage: laneway %s (run with --help for the flags)", cmd.synopsis)
	}
	c, err := cf.client()
	if err != nil {
		return err
	}
	return cmd.run(ctx, cmdIO{c: c, flags: cf, stdin: stdin, stdout: stdout, stderr: stderr}, pos)
}

// parseInterspersed parses flags given before or after positional arguments
// ("endpoints get ep_1 -o json" as well as "endpoints get -o json ep_1").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--" too; everything after it is positional.
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// group dispatches "laneway <group> <sub> ...", where sub may be more than
// one word ("endpoints feed-tokens create").
type group struct {
	name  string
	about string
	cmds  []*command
	// common says what every command takes; "" for the admin client's flags.
	common string
}

// adminCommon is what the admin client's commands take.
const adminCommon = `Every command takes --api (env LANEWAY_API), --token (env LANEWAY_ADMIN_TOKEN),
-o table|json (env LANEWAY_OUTPUT) and --timeout (env LANEWAY_TIMEOUT).`

func (g *group) run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		g.usage(stdout)
		return nil
	}
	for _, c := range g.cmds {
		words := strings.Fields(strings.TrimPrefix(c.name, g.name+" "))
		if len(args) >= len(words) && slices.Equal(args[:len(words)], words) {
			return c.exec(ctx, args[len(words):], stdin, stdout, stderr)
		}
	}
	var b strings.Builder
	g.usage(&b)
	return fmt.Errorf("unknown command %q\n%s", g.name+" "+args[0], b.String())
}

func (g *group) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: laneway %s <command> [flags]\n\n%s\n\nCommands:\n", g.name, g.about)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range g.cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.synopsis, firstLine(c.about))
	}
	tw.Flush()
	common := g.common
	if common == "" {
		common = adminCommon
	}
	fmt.Fprintf(w, "\n%s\nRun 'laneway %s <command> --help' for its flags.\n", common, g.name)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writeJSON prints one JSON document, indented.
func writeJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		return fmt.Errorf("the API answered with invalid JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// encodeJSON prints v as one indented JSON document.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		// A tab or newline in a value would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fmtTime shows a time in UTC to the second, or "-".
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// fmtSeconds shows an age in seconds compactly: "0s", "1.4s", "3m12s".
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d <= 0:
		return "0.0s"
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", s)
	default:
		return d.Round(time.Second).String()
	}
}

// timeFlag parses RFC 3339 or a duration meaning that long ago ("15m").
type timeFlag struct {
	t   time.Time
	now func() time.Time
}

func (f *timeFlag) String() string {
	if f == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		f.t = time.Time{}
		return nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		f.t = t
		return nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		now := time.Now
		if f.now != nil {
			now = f.now
		}
		f.t = now().Add(-d)
		return nil
	}
	return errors.New("want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration ago (15m, 2h)")
}

// commaList is a comma-separated flag that remembers whether it was given.
type commaList struct {
	set    bool
	values []string
}

func (l *commaList) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values, ",")
}

func (l *commaList) Set(v string) error {
	l.set = true
	l.values = []string{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l.values = append(l.values, s)
		}
	}
	return nil
}

// optionalInt is an int flag that remembers whether it was given.
type optionalInt struct {
	set bool
	n   int
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return fmt.Sprint(o.n)
}

func (o *optionalInt) Set(v string) error {
	if _, err := fmt.Sscan(v, &o.n); err != nil {
		return errors.New("want an integer")
	}
	o.set = true
	return nil
}

// optionalString is a string flag that remembers whether it was given.
type optionalString struct {
	set bool
	s   string
}

func (o *optionalString) String() string {
	if o == nil {
		return ""
	}
	return o.s
}

func (o *optionalString) Set(v string) error { o.set, o.s = true, v; return nil }

// optionalDuration is a duration flag that remembers whether it was given.
type optionalDuration struct {
	set bool
	d   time.Duration
}

func (o *optionalDuration) String() string {
	if o == nil || !o.set {
		return ""
	}
	return o.d.String()
}

func (o *optionalDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return errors.New("want a duration such as 24h or 0")
	}
	o.set, o.d = true, d
	return nil
}
