package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/hooksproxy/hooksproxy/bench"
)

// child is a running role process seen from the parent.
type child struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// base is the data address as http://host:port; ctl the control one.
	base, ctl string
	hc        *http.Client
	done      chan error
}

// startChild re-executes this binary as role and waits for its READY line.
func startChild(exe string, a roleArgs, stderr io.Writer) (*child, error) {
	args := []string{"-role", a.role, "-chunk", strconv.Itoa(a.chunk)}
	if a.upstream != "" {
		args = append(args, "-upstream", a.upstream)
	}
	if len(a.sizes) > 0 {
		args = append(args, "-sizes", joinInts(a.sizes))
	}
	if a.profile != "" {
		args = append(args, "-cpuprofile", a.profile)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", a.role, err)
	}
	c := &child{role: a.role, cmd: cmd, stdin: stdin, hc: &http.Client{Timeout: 60 * time.Second}, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- line
			}
		}
		c.done <- cmd.Wait()
	}()
	select {
	case line := <-ready:
		f := strings.Fields(line)
		if len(f) != 2 {
			c.stop()
			return nil, fmt.Errorf("%s: bad READY line %q", a.role, line)
		}
		c.base, c.ctl = "http://"+f[0], "http://"+f[1]
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("%s exited before it was ready: %v", a.role, err)
	case <-time.After(60 * time.Second):
		c.stop()
		return nil, fmt.Errorf("%s: not ready after 60s", a.role)
	}
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// stats reads the child's process statistics; gc first collects garbage
// and returns free memory to the OS.
func (c *child) stats(gc bool) (bench.ProcStats, error) {
	q := "0"
	if gc {
		q = "1"
	}
	resp, err := c.hc.Get(c.ctl + "/stats?gc=" + q)
	if err != nil {
		return bench.ProcStats{}, fmt.Errorf("%s stats: %w", c.role, err)
	}
	defer resp.Body.Close()
	var st bench.ProcStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("%s stats: %w", c.role, err)
	}
	return st, nil
}

// call sends a control request and returns its body.
func (c *child) call(method, path string) (string, error) {
	req, err := http.NewRequest(method, c.ctl+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", c.role, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: status %d", c.role, path, resp.StatusCode)
	}
	return string(b), err
}

// stop closes the child's stdin, which ends it, and waits (killing it if
// it lingers).
func (c *child) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitUntil polls cond every interval until it holds or ctx ends.
func waitUntil(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

var errUsage = errors.New("usage")

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// parseInts reads a comma-separated list of positive integers; a K suffix
// multiplies by 1024.
func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1
		if v, ok := strings.CutSuffix(strings.ToUpper(f), "K"); ok {
			f, mul = v, 1024
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || n > 1<<30/mul {
			return nil, fmt.Errorf("%w: %q is not a positive integer", errUsage, f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// selfExe is the path to re-execute for child roles.
func selfExe() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding own executable: %w", err)
	}
	return exe, nil
}
