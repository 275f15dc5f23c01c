package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"dubstudio/config"
)

const doctorUsage = `Usage: dubstudio doctor [flags]

Checks the IndexTTS install of this machine before it renders, one line per check (OK,
WARN, FAIL or SKIP, with what to do when one is not OK): that the host's Python
environment starts and imports IndexTTS, Python and torch versions, CUDA and the
driver, the model directory's files and sizes, config.yaml's version and vocabulary
against the checkpoint's tensor shapes, each hf_cache/ entry, the Qwen emotion model,
which BigVGAN kernel will run (it is built now, so the first host start does not wait
for nvcc), and free GPU memory. Exits with status 1 when a check fails. A model host
runs the same checks before it loads and refuses to start on a failure.

Run it as the worker would run hosts: with HOST_PYTHON, INDEXTTS_DIR,
INDEXTTS_MODEL_DIR and INDEXTTS_VARIANT set, on the GPU machine (CUDA_VISIBLE_DEVICES
picks the card).

Flags:
`

// doctorResult is one line of `indextts_host.py --check --json`.
type doctorResult struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

func (r doctorResult) line() string {
	s := fmt.Sprintf("%-4s %s: %s", r.Status, r.Name, r.Detail)
	if r.Fix != "" && (r.Status == "FAIL" || r.Status == "WARN") {
		s += " -> " + r.Fix
	}
	return s
}

// doctorCmd runs `dubstudio doctor`.
func doctorCmd(ctx context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), doctorUsage); fs.PrintDefaults() }
	opts := doctorOpts{}
	fs.StringVar(&opts.modelDir, "model-dir", cfg.IndexTTSModelDir, "checkpoint directory (INDEXTTS_MODEL_DIR)")
	fs.StringVar(&opts.variant, "variant", cfg.IndexTTSVariant, "IndexTTS release: 2 or 2.5 (INDEXTTS_VARIANT)")
	fs.BoolVar(&opts.qwenEmo, "qwen-emo", false, "check the Qwen emotion model too (profiles with emotion from text)")
	fs.BoolVar(&opts.noKernel, "no-cuda-kernel", false, "hosts run without BigVGAN's CUDA kernel")
	fs.DurationVar(&opts.timeout, "timeout", 20*time.Minute, "how long the checks may take (building the BigVGAN kernel takes minutes the first time)")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	if opts.modelDir == "" {
		return errors.New("doctor: give -model-dir or set INDEXTTS_MODEL_DIR")
	}
	failed, err := runDoctor(ctx, cfg, opts, os.Stdout)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d check(s) failed", failed)
	}
	return nil
}

type doctorOpts struct {
	modelDir string
	variant  string
	qwenEmo  bool
	noKernel bool
	timeout  time.Duration
}

// runDoctor prints the checks to w and returns how many failed. The Python side
// (tts/hosts/indextts_check.py, through the host's --check) does the checks; this side
// first makes sure the host's interpreter starts at all, which is what a moved or
// half-unpacked environment breaks first.
func runDoctor(ctx context.Context, cfg *config.Config, o doctorOpts, w io.Writer) (int, error) {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	env := append(os.Environ(), hostEnv(cfg, engineIndexTTS)...)
	start := exec.CommandContext(ctx, cfg.HostPython, "-c", "import sys; print(sys.executable, sys.version.split()[0])")
	start.Env = env
	out, err := start.CombinedOutput()
	if err != nil {
		r := doctorResult{Name: "environment", Status: "FAIL",
			Detail: fmt.Sprintf("%s does not start: %v %s", cfg.HostPython, err, strings.TrimSpace(lastLine(out))),
			Fix:    "set HOST_PYTHON to the environment's python; a moved environment must be unpacked with scripts/indextts_env.sh unpack"}
		fmt.Fprintln(w, r.line())
		return 1, nil
	}
	fmt.Fprintln(w, doctorResult{Name: "environment", Status: "OK", Detail: strings.TrimSpace(string(out))}.line())

	argv := []string{filepath.Join(cfg.HostsDir, "indextts_host.py"), "--check", "--json",
		"--model-dir", o.modelDir, "--variant", o.variant}
	if o.qwenEmo {
		argv = append(argv, "--qwen-emo")
	}
	if o.noKernel {
		argv = append(argv, "--no-cuda-kernel")
	}
	check := exec.CommandContext(ctx, cfg.HostPython, argv...)
	check.Env = env
	var stderr bytes.Buffer
	check.Stderr = &stderr
	stdout, err := check.Output()
	failed := 0
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	n := 0
	for sc.Scan() {
		var r doctorResult
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Name == "" {
			continue // IndexTTS and its libraries print their own lines
		}
		n++
		if r.Status == "FAIL" {
			failed++
		}
		fmt.Fprintln(w, r.line())
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return failed, fmt.Errorf("doctor: the checks did not finish: %w", ctx.Err())
	case n == 0:
		// The check itself broke (an import error in the hosts directory, say).
		r := doctorResult{Name: "check", Status: "FAIL", Detail: fmt.Sprintf("the host's check did not run: %v %s", err, lastLine(stderr.Bytes())),
			Fix: "check DUBSTUDIO_HOSTS_DIR and the environment (see the error)"}
		fmt.Fprintln(w, r.line())
		return failed + 1, nil
	case err != nil && !errors.As(err, &exit):
		return failed, fmt.Errorf("doctor: running the check: %w", err)
	case err != nil && failed == 0:
		r := doctorResult{Name: "check", Status: "FAIL", Detail: fmt.Sprintf("the host's check exited with %v: %s", err, lastLine(stderr.Bytes()))}
		fmt.Fprintln(w, r.line())
		return 1, nil
	}
	return failed, nil
}

// lastLine is the last non-empty line of a process's output, for a one-line message.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
