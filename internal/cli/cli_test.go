package cli

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	newFS := func(stderr *bytes.Buffer) *flag.FlagSet {
		fs := flag.NewFlagSet("switchboard thing", flag.ContinueOnError)
		fs.SetOutput(stderr)
		fs.String("dir", ".", "a directory")
		fs.Usage = func() { fs.Output().Write([]byte("usage: switchboard thing\n")) }
		return fs
	}
	for _, c := range []struct {
		name       string
		args       []string
		positional bool
		code       int
		ok         bool
		stdout     string
		stderr     string
	}{
		{name: "flags", args: []string{"--dir", "x"}, ok: true},
		{name: "help", args: []string{"--dir", "x", "--help"}, code: 0, stdout: "usage: switchboard thing"},
		{name: "bad flag", args: []string{"--nope"}, code: 2, stderr: "flag provided but not defined: -nope"},
		{name: "argument refused", args: []string{"extra"}, code: 2, stderr: `switchboard thing: unexpected argument "extra"`},
		{name: "argument allowed", args: []string{"extra"}, positional: true, ok: true},
		{name: "help after --", args: []string{"--", "--help"}, positional: true, ok: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, ok := Parse(newFS(&stderr), c.args, &stdout, c.positional)
			if code != c.code || ok != c.ok {
				t.Fatalf("Parse(%q) = %d, %v; want %d, %v (stderr %q)", c.args, code, ok, c.code, c.ok, stderr.String())
			}
			if !strings.Contains(stdout.String(), c.stdout) || (c.stdout == "" && stdout.Len() > 0) {
				t.Errorf("stdout %q, want %q", stdout.String(), c.stdout)
			}
			if !strings.Contains(stderr.String(), c.stderr) || (c.stderr == "" && stderr.Len() > 0) {
				t.Errorf("stderr %q, want %q", stderr.String(), c.stderr)
			}
		})
	}
}
