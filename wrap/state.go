package wrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Names of the files in the state directory.
const (
	startedFile = "started"
	exitFile    = "exit"
)

// state is the state directory of one pod.
type state struct{ dir string }

// previous is what earlier starts of wrap in this pod left behind.
type previous struct {
	// ran: a started marker or an exit record exists, so the child must not run again.
	ran bool
	// record is the exit record (a termination message); "" when there is none or it is unreadable.
	record string
	// started is the started marker's content, for messages.
	started string
}

// load reads the state directory. A file that cannot be read for any reason but its absence is
// an error: wrap cannot then tell whether the child already ran, and must not start it.
func (s state) load() (previous, error) {
	var p previous
	b, err := os.ReadFile(filepath.Join(s.dir, exitFile))
	switch {
	case err == nil:
		p.ran = true
		if _, ok := ParseTerminationMessage(string(b)); ok {
			p.record = string(b)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return p, fmt.Errorf("reading the exit record: %w", err)
	}
	b, err = os.ReadFile(filepath.Join(s.dir, startedFile))
	switch {
	case err == nil:
		p.ran = true
		p.started = strings.TrimSpace(string(b))
	case !errors.Is(err, fs.ErrNotExist):
		return p, fmt.Errorf("reading the started marker: %w", err)
	}
	return p, nil
}

// markStarted writes the started marker; info says who started when.
func (s state) markStarted(info string) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("creating the state directory: %w", err)
	}
	if err := writeAtomic(s.dir, startedFile, info+"\n"); err != nil {
		return fmt.Errorf("writing the started marker: %w", err)
	}
	return nil
}

// record writes the exit record, a termination message.
func (s state) record(msg string) error {
	if err := writeAtomic(s.dir, exitFile, msg); err != nil {
		return fmt.Errorf("writing the exit record: %w", err)
	}
	return nil
}

// writeAtomic replaces dir/name with content so that a reader (the next start of wrap) sees the
// old file or the new one, never a part: write a temporary file, flush it, rename it over the
// target, flush the directory. The flushes matter because an emptyDir on disk outlives a node
// reboot when the pod stays bound to the node.
func writeAtomic(dir, name, content string) (err error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
