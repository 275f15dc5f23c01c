//go:build !unix

package gpu

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

func terminate(cmd *exec.Cmd) error { return cmd.Process.Signal(os.Interrupt) }

func kill(cmd *exec.Cmd) error { return cmd.Process.Kill() }
