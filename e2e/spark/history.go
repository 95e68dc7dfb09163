package spark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// HistoryServer is Spark's own History Server of one Spark version, run on the host over a folder
// of event logs: what a user reads an app's history with.
type HistoryServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	out  SyncBuffer
}

// HistoryApp is one application as the History Server's REST API lists it
// (/api/v1/applications): its id, name and attempts.
type HistoryApp struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Attempts []struct {
		AttemptID string `json:"attemptId"`
		Completed bool   `json:"completed"`
	} `json:"attempts"`
}

// StartHistoryServer starts d's History Server reading logDir (a local folder) every second, on a
// free port of the loopback interface, and waits until it answers. Stop ends it.
func StartHistoryServer(ctx context.Context, d Dist, logDir string) (*HistoryServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	h := &HistoryServer{url: "http://127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	h.cmd = exec.Command("java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", filepath.Join(d.Home, "jars", "*"),
		"-Dspark.history.fs.logDirectory=file:"+logDir,
		"-Dspark.history.fs.update.interval=1s",
		"-Dspark.history.ui.port="+strconv.Itoa(port),
		"org.apache.spark.deploy.history.HistoryServer")
	h.cmd.Env = []string{"SPARK_HOME=" + d.Home, "SPARK_SCALA_VERSION=" + d.Scala, "PATH=/usr/bin:/bin"}
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("spark: History Server: %w", err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := h.Applications(ctx); err == nil {
			return h, nil
		}
		select {
		case <-h.done:
			return nil, fmt.Errorf("spark: the History Server exited:\n%s", h.Output())
		case <-ctx.Done():
			h.Stop()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			h.Stop()
			return nil, fmt.Errorf("spark: the History Server did not answer within 90s:\n%s", h.Output())
		}
	}
}

// Output is what the server printed so far.
func (h *HistoryServer) Output() string { return h.out.String() }

// Applications lists the applications the server has read.
func (h *HistoryServer) Applications(ctx context.Context) ([]HistoryApp, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url+"/api/v1/applications", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("spark: History Server: %s: %s", resp.Status, body)
	}
	var apps []HistoryApp
	if err := json.Unmarshal(body, &apps); err != nil {
		return nil, errors.Join(fmt.Errorf("spark: History Server's answer: %q", body), err)
	}
	return apps, nil
}

// Stop ends the server and waits for it.
func (h *HistoryServer) Stop() {
	if h.cmd.Process != nil {
		_ = h.cmd.Process.Kill()
	}
	<-h.done
}
