// Command dubstudio runs the dubbing studio: the web app, workers and the tools to
// manage them. Run `dubstudio help` for the commands and settings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"dubstudio/config"
	"dubstudio/live"
	"dubstudio/migrations"
	"dubstudio/studio"
	"dubstudio/web"
	"dubstudio/workflow"
)

const usage = `dubstudio — AI dubbing studio

Usage:
  dubstudio serve                     run the web app (and an embedded worker unless WORKER=false)
  dubstudio worker                    run a worker host alone (renders lines with ENGINE)
  dubstudio calibrate [flags]         measure a GPU for a concurrency profile (calibrate -h for the flags)
  dubstudio gpus                      print what NVML sees: each GPU with one sample, as JSON
  dubstudio createdb                  create the database DATABASE_URL names, if the server has none of that name
  dubstudio doctor [flags]            check this machine's IndexTTS install, one line per check (doctor -h)
  dubstudio migrate                   apply database migrations and exit
  dubstudio user add NAME ROLE        add a user (role: admin, manager, editor); prints a password
  dubstudio user list                 print every user with their role
  dubstudio user set-role NAME ROLE   change a user's role
  dubstudio user reset-password NAME  set a new random password and print it
  dubstudio help                      show this help

Settings (environment variables; secrets also as NAME_FILE):
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(os.Stderr, "dubstudio:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dubstudio:", err)
		os.Exit(1)
	}
}

// usageError is a command line that names no command, a flag no command takes, or
// arguments its command cannot run with: the process exits 2 with the command's usage.
type usageError string

func (e usageError) Error() string { return string(e) }

// commandUsage returns the lines of usage that describe cmd, or "" for an unknown one.
func commandUsage(cmd string) string {
	var b strings.Builder
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "dubstudio" && f[1] == cmd {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// flagless are the commands that take no flags: -h or --help prints their usage
// and runs nothing, any other flag is a usage error. (calibrate and doctor parse
// their own flags, help included.)
var flagless = map[string]bool{"serve": true, "worker": true, "gpus": true, "createdb": true, "migrate": true, "user": true}

// helpOrBadFlag handles the flags of a flagless command before anything runs: it
// prints the command's usage for -h/--help (done true), and refuses any other flag.
func helpOrBadFlag(cmd string, args []string) (done bool, err error) {
	if !flagless[cmd] {
		return false, nil
	}
	for _, a := range args {
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			fmt.Print("Usage:\n" + commandUsage(cmd) + "\nSettings: see `dubstudio help`.\n")
			return true, nil
		case strings.HasPrefix(a, "-"):
			return false, usageError(fmt.Sprintf("%s takes no flag %s\nUsage:\n%s", cmd, a, commandUsage(cmd)))
		}
	}
	return false, nil
}

// parseFlags parses the flags of a command that has some (calibrate, doctor): help
// is true for -h/--help (the usage is printed, nothing runs); a flag it does not
// know, or an argument after the flags (it takes none: `calibrate 1` is not
// `calibrate -gpu 1`), is a usage error.
func parseFlags(fs *flag.FlagSet, args []string) (help bool, err error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return true, nil
		}
		return false, usageError(fmt.Sprintf("%s: %v (%s -h lists the flags)", fs.Name(), err, fs.Name()))
	}
	if fs.NArg() > 0 {
		return false, usageError(fmt.Sprintf("%s takes flags only, not %q (%s -h lists the flags)", fs.Name(), fs.Arg(0), fs.Name()))
	}
	return false, nil
}

func run(ctx context.Context, args []string) error {
	flag.CommandLine.Usage = func() { fmt.Fprint(os.Stderr, usage+config.Help()) }
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Print(usage + config.Help())
		return nil
	}
	if commandUsage(args[0]) == "" {
		return usageError(fmt.Sprintf("unknown command %q\n%s", args[0], usage))
	}
	if done, err := helpOrBadFlag(args[0], args[1:]); done || err != nil {
		return err
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	logger := newLogger(cfg.LogLevel)
	switch args[0] {
	case "serve":
		return serve(ctx, cfg, logger)
	case "createdb":
		created, err := studio.CreateDatabase(ctx, cfg.DatabaseURL)
		if created {
			fmt.Println("created the database")
		}
		return err
	case "migrate":
		store, err := open(ctx, cfg, logger)
		if err != nil {
			return err
		}
		store.Pool().Close()
		fmt.Println("migrations applied")
		return nil
	case "user":
		return userCmd(ctx, cfg, logger, args[1:])
	case "worker":
		return workerCmd(ctx, cfg, logger)
	case "calibrate":
		return calibrateCmd(ctx, cfg, logger, args[1:])
	case "gpus":
		return gpusCmd(ctx, logger)
	case "doctor":
		return doctorCmd(ctx, cfg, args[1:])
	}
	return fmt.Errorf("unknown command %q (try `dubstudio help`)", args[0])
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// open connects, applies migrations and returns the store.
func open(ctx context.Context, cfg *config.Config, logger *slog.Logger) (*studio.Store, error) {
	pool, err := studio.Connect(ctx, cfg.DatabaseURL)
	if studio.IsMissingDatabase(err) {
		return nil, fmt.Errorf("%w; `dubstudio createdb` creates it", err)
	}
	if err != nil {
		return nil, err
	}
	if err := migrations.Apply(ctx, pool, logger); err != nil {
		pool.Close()
		return nil, err
	}
	store, err := studio.NewStore(pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	store.Limits = studio.Limits{MaxLineMs: cfg.MaxLineMs, MaxExportMs: cfg.MaxExportMs}
	return store, nil
}

func serve(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	if err := cfg.EnsureSessionSecret(); err != nil {
		return err
	}
	store, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer store.Pool().Close()

	ready := readyInfo{BaseURL: cfg.BaseURL, DatabaseURL: cfg.DatabaseURL, Command: os.Args[0]}
	if _, ready.Password, err = store.EnsureAdmin(ctx); err != nil {
		return err
	}
	// The first admin is "admin"; a later run still names it, if it is there.
	admin, err := store.UserByUsername(ctx, "admin")
	switch {
	case err == nil:
		ready.Admin = admin.Username
		if cfg.DemoProject {
			demo, err := store.EnsureDemoProject(ctx, admin.ID)
			if err != nil {
				return err
			}
			if demo != nil {
				ready.DemoProject = demo.ID
			}
		}
	case !errors.Is(err, studio.ErrNotFound):
		return err
	}
	// Live status: one connection LISTENs for line changes and feeds the event streams.
	broker := live.NewBroker(live.BrokerConfig{})
	listenCtx, stopListening := context.WithCancel(ctx)
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		_ = live.NewListener(store.Pool(), broker, live.ListenerConfig{Logger: logger}).Run(listenCtx)
	}()
	defer func() { stopListening(); <-listening }() // before the pool closes
	pipeline, err := workflow.NewPipeline(store, logger)
	if err != nil {
		return err
	}
	pipeline.FirstLines = cfg.RenderFirstLines
	if cfg.Worker {
		_, stopWorker, err := startWorker(ctx, cfg, store, pipeline, logger)
		if err != nil {
			return err
		}
		defer stopWorker() // after the HTTP server has shut down
	}
	// River's UI reads the queue through its own (non-working) client.
	uiClient, err := river.NewClient(riverpgxv5.New(store.Pool()), &river.Config{Logger: logger})
	if err != nil {
		return err
	}
	riverUI, err := web.MountRiverUI(ctx, uiClient, logger)
	if err != nil {
		return err
	}
	srv := web.New(web.Deps{Config: cfg, Store: store, Logger: logger, Live: broker, Renderer: pipeline, Exporter: pipeline, Proxies: pipeline,
		Mounts: []func(web.Routes){riverUI}})
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (is another dubstudio running? stop it, or set HTTP_ADDR): %w", cfg.HTTPAddr, err)
	}
	logger.InfoContext(ctx, "listening", "addr", cfg.HTTPAddr)
	if err := writeReady(os.Stdout, ready); err != nil {
		ln.Close()
		return err
	}
	return srv.Serve(ctx, ln)
}

// userForms are the user subcommands and their arguments, as the usage shows them.
var userForms = map[string]string{"add": "add NAME ROLE", "list": "list", "set-role": "set-role NAME ROLE",
	"reset-password": "reset-password NAME"}

// checkUserArgs refuses a user command line that cannot run (no or an unknown
// subcommand, the wrong number of arguments, an unknown role) as a usage error,
// before anything connects to the database.
func checkUserArgs(args []string) error {
	if len(args) == 0 {
		return usageError("user needs a subcommand\nUsage:\n" + commandUsage("user"))
	}
	form, ok := userForms[args[0]]
	if !ok {
		return usageError(fmt.Sprintf("unknown user subcommand %q\nUsage:\n%s", args[0], commandUsage("user")))
	}
	if len(args) != len(strings.Fields(form)) {
		return usageError("usage: dubstudio user " + form)
	}
	if args[0] == "add" || args[0] == "set-role" {
		if _, err := studio.ParseRole(args[2]); err != nil {
			return usageError(fmt.Sprintf("%v\nusage: dubstudio user %s", err, form))
		}
	}
	return nil
}

func userCmd(ctx context.Context, cfg *config.Config, logger *slog.Logger, args []string) error {
	if err := checkUserArgs(args); err != nil {
		return err
	}
	store, err := open(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer store.Pool().Close()
	switch args[0] {
	case "add":
		role, err := studio.ParseRole(args[2])
		if err != nil {
			return err
		}
		password := studio.GeneratePassword()
		if _, err := store.CreateUser(ctx, studio.CreateUserParams{Username: args[1], Role: role, Password: password}); err != nil {
			return err
		}
		fmt.Printf("created %s (%s), password: %s\n", args[1], role, password)
	case "list":
		users, err := store.Users(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tUSER\tROLE\tDISABLED\tCREATED")
		for _, u := range users {
			fmt.Fprintf(w, "%d\t%s\t%s\t%v\t%s\n", u.ID, u.Username, u.Role, u.Disabled, u.CreatedAt.Format("2006-01-02"))
		}
		return w.Flush()
	case "set-role":
		role, err := studio.ParseRole(args[2])
		if err != nil {
			return err
		}
		u, err := store.UserByUsername(ctx, args[1])
		if err != nil {
			return err
		}
		if err := store.SetUserRole(ctx, u.ID, role); err != nil {
			return err
		}
		fmt.Printf("%s is now %s\n", u.Username, role)
	case "reset-password":
		u, err := store.UserByUsername(ctx, args[1])
		if err != nil {
			return err
		}
		password := studio.GeneratePassword()
		if err := store.SetUserPassword(ctx, u.ID, password); err != nil {
			return err
		}
		fmt.Printf("new password for %s: %s\n", u.Username, password)
	default:
		return fmt.Errorf("unknown user subcommand %q", args[0])
	}
	return nil
}
