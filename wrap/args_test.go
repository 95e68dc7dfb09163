package wrap

import (
	"errors"
	"flag"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		want    Options // streams are checked apart
		wantErr string
	}{
		{name: "defaults", args: []string{"--", "/opt/entrypoint.sh", "driver", "--conf", "k=v"},
			want: Options{StateDir: DefaultStateDir, TerminationLog: DefaultTerminationLog, Command: []string{"/opt/entrypoint.sh", "driver", "--conf", "k=v"}}},
		{name: "both flags, both spellings", args: []string{"--state-dir", "/s", "-termination-log=/t", "--", "cmd"},
			want: Options{StateDir: "/s", TerminationLog: "/t", Command: []string{"cmd"}}},
		{name: "empty termination log writes none", args: []string{"--termination-log=", "--", "cmd"},
			want: Options{StateDir: DefaultStateDir, TerminationLog: "", Command: []string{"cmd"}}},
		{name: "a later -- belongs to the command", args: []string{"--", "cmd", "--", "--state-dir", "x"},
			want: Options{StateDir: DefaultStateDir, TerminationLog: DefaultTerminationLog, Command: []string{"cmd", "--", "--state-dir", "x"}}},
		{name: "command arguments may be empty strings", args: []string{"--", "cmd", ""},
			want: Options{StateDir: DefaultStateDir, TerminationLog: DefaultTerminationLog, Command: []string{"cmd", ""}}},

		{name: "nothing", args: nil, wantErr: "driverset wrap: no command (expected -- COMMAND"},
		{name: "no --", args: []string{"/opt/entrypoint.sh", "driver"}, wantErr: `driverset wrap: missing -- before the command "/opt/entrypoint.sh"`},
		{name: "flags but no --", args: []string{"--state-dir", "/s"}, wantErr: "driverset wrap: no command (expected -- COMMAND"},
		{name: "nothing after --", args: []string{"--state-dir", "/s", "--"}, wantErr: "driverset wrap: no command after --"},
		{name: "empty command", args: []string{"--", "", "x"}, wantErr: "driverset wrap: empty command name after --"},
		{name: "argument before --", args: []string{"cmd", "--", "x"}, wantErr: `driverset wrap: unexpected argument "cmd" before --`},
		{name: "unknown flag", args: []string{"--restarts=3", "--", "cmd"}, wantErr: "driverset wrap: flag provided but not defined: -restarts"},
		{name: "flag without value", args: []string{"--state-dir"}, wantErr: "driverset wrap: flag needs an argument: -state-dir"},
		{name: "empty state dir", args: []string{"--state-dir=", "--", "cmd"}, wantErr: "driverset wrap: --state-dir must not be empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "usage: driverset wrap") {
					t.Fatalf("ParseArgs(%q) error = %v, want %q and the usage", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseArgs(%q): %v", tc.args, err)
			}
			if got.StateDir != tc.want.StateDir || got.TerminationLog != tc.want.TerminationLog || !slices.Equal(got.Command, tc.want.Command) {
				t.Errorf("ParseArgs(%q) = %+v, want %+v", tc.args, got, tc.want)
			}
			if got.Stdin != os.Stdin || got.Stdout != os.Stdout || got.Stderr != os.Stderr || got.Signals != nil {
				t.Errorf("ParseArgs(%q) does not pass the process's streams and signals through", tc.args)
			}
		})
	}
}

func TestParseArgsHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-h", "--", "cmd"}} {
		_, err := ParseArgs(args)
		if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(err.Error(), "usage: driverset wrap") {
			t.Errorf("ParseArgs(%q) = %v, want the usage and flag.ErrHelp", args, err)
		}
	}
}

func TestParseArgsDoesNotAliasItsInput(t *testing.T) {
	args := []string{"--", "cmd", "a"}
	o, err := ParseArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	args[1] = "changed"
	if o.Command[0] != "cmd" {
		t.Errorf("Command follows the caller's slice: %q", o.Command)
	}
}

func TestParseArgsSelfFence(t *testing.T) {
	o, err := ParseArgs([]string{"--heartbeat-lease", "d-0-heartbeat", "--self-fence=90s", "--", "cmd"})
	if err != nil || o.HeartbeatLease != "d-0-heartbeat" || o.SelfFence != 90*time.Second {
		t.Errorf("ParseArgs = %+v, %v", o, err)
	}
	for _, args := range [][]string{
		{"--heartbeat-lease", "x", "--", "cmd"},
		{"--self-fence=1m", "--", "cmd"},
		{"--heartbeat-lease", "x", "--self-fence=-1s", "--", "cmd"},
	} {
		if _, err := ParseArgs(args); err == nil || !strings.Contains(err.Error(), "usage: driverset wrap") {
			t.Errorf("ParseArgs(%q) = %v, want an error and the usage", args, err)
		}
	}
}

func TestCommandOptions(t *testing.T) {
	for _, tc := range []struct {
		name           string
		command        []string
		isWrap, hasErr bool
		lease          string
	}{
		{name: "driverset wrap, its flags read", command: []string{"/opt/driverset/bin/driverset", "wrap", "--heartbeat-lease", "l", "--self-fence", "2m", "--", "e"}, isWrap: true, lease: "l"},
		{name: "another program", command: []string{"/opt/entrypoint.sh", "driver"}},
		{name: "driverset, not wrap", command: []string{"/opt/driverset/bin/driverset", "serve"}},
		{name: "too short", command: []string{"driverset"}},
		{name: "wrap with a bad flag", command: []string{"driverset", "wrap", "--nope", "--", "e"}, isWrap: true, hasErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, isWrap, err := CommandOptions(tc.command)
			if isWrap != tc.isWrap || (err != nil) != tc.hasErr || o.HeartbeatLease != tc.lease {
				t.Errorf("CommandOptions(%q) = lease %q, isWrap %v, err %v", tc.command, o.HeartbeatLease, isWrap, err)
			}
		})
	}
}
