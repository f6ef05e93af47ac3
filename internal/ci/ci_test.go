// Package ci holds the test of the project's CI script, .ci/run, and of the
// test command it runs, .ci/test: that each of them fails when any of its
// steps fails. Both once exited 0 with a failing go test (a step inside an
// `a && b && c` list, where bash's -e does not act), so no failing test,
// vet or staticcheck finding could stop a submission.
package ci

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goShim stands in for the go command: it logs each call, and fails the
// one step named by $CI_SHIM_FAIL, as that step would fail for real. A
// "fuzz-new" failure first writes a new input into the target's corpus, as
// go test -fuzz does on a finding; "fuzz-deadline" fails the fuzz run only
// (Go's coordinator racing -fuzztime, golang/go#75804), "fuzz-broken" the
// replay of the corpus too.
const goShim = `#!/usr/bin/env bash
echo "go $* [$(basename "$PWD")]" >>"$CI_SHIM_LOG"
embed=no; case "$PWD" in */runtime/example/embed) embed=yes;; esac
fuzz=no; case " $* " in *" -fuzz "*) fuzz=yes;; *" -run ^Fuzz"*) fuzz=replay;; esac
fail() { echo "shim: $CI_SHIM_FAIL fails" >&2; exit 1; }
case "$CI_SHIM_FAIL:$1:$embed:$fuzz" in
  vet:vet:no:*|staticcheck:run:no:*|test:test:no:no|embed-vet:vet:yes:*|embed-test:test:yes:no) fail;;
  fuzz-broken:test:no:yes|fuzz-broken:test:no:replay|fuzz-deadline:test:no:yes) fail;;
  fuzz-new:test:no:yes)
    pkg=${@: -1}; target=$(echo "$*" | sed -n 's/.*-fuzz \^\([A-Za-z]*\)\$.*/\1/p')
    mkdir -p "${pkg#./}/testdata/fuzz/$target" && echo "go test fuzz v1" >"${pkg#./}/testdata/fuzz/$target/new"
    fail;;
esac
exit 0
`

// runCI runs a copy of .ci/run and .ci/test, in a git repository of their
// own (the fuzz step asks git what the run added), with shims for go and
// npm first on PATH.
func runCI(t *testing.T, fail string) (int, string, string) {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"run", "test"} {
		b, err := os.ReadFile(filepath.Join("..", "..", ".ci", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, ".ci"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, ".ci", name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "runtime", "example", "embed"), 0o755); err != nil {
		t.Fatal(err)
	}
	git := exec.Command("git", "init", "-q", root)
	if out, err := git.CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}

	shims := t.TempDir()
	npm := "#!/usr/bin/env bash\n[ \"$CI_SHIM_FAIL\" = npm ] && { echo 'shim: npm fails' >&2; exit 1; }\nexit 0\n"
	for name, body := range map[string]string{"go": goShim, "npm": npm} {
		if err := os.WriteFile(filepath.Join(shims, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(t.TempDir(), "calls")
	cmd := exec.Command("bash", filepath.Join(root, ".ci", "run"))
	cmd.Env = append(os.Environ(), "PATH="+shims+":"+os.Getenv("PATH"), "CI=true", "CI_SHIM_FAIL="+fail, "CI_SHIM_LOG="+log)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running .ci/run: %v", err)
		}
		code = ee.ExitCode()
	}
	calls, _ := os.ReadFile(log)
	return code, out.String(), string(calls)
}

// TestCIFailsWhenAStepFails: every step of the test command, and the
// installs before it, fail CI; the run stops at the first failure.
func TestCIFailsWhenAStepFails(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips .ci/run with a failing shim for each step; run it with go test -run '^TestCIFailsWhenAStepFails$' ./internal/ci")
	}
	for _, step := range []string{"vet", "staticcheck", "test", "embed-vet", "embed-test", "npm", "fuzz-broken"} {
		t.Run(step, func(t *testing.T) {
			code, out, calls := runCI(t, step)
			if code == 0 {
				t.Fatalf(".ci/run exited 0 with %s failing\noutput:\n%s\ngo calls:\n%s", step, out, calls)
			}
			if step != "fuzz-broken" && strings.Contains(calls, "-fuzz") {
				t.Errorf(".ci/run went on to fuzzing after %s failed\ngo calls:\n%s", step, calls)
			}
		})
	}
}

// TestCIPasses: with every step passing the script exits 0 having run each
// step (so the failures above are the steps', not the shims'), and a new
// input found by fuzzing is reported without failing the run.
func TestCIPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skips .ci/run with every step passing; run it with go test -run '^TestCIPasses$' ./internal/ci")
	}
	code, out, calls := runCI(t, "")
	if code != 0 {
		t.Fatalf(".ci/run exited %d with every step passing\noutput:\n%s", code, out)
	}
	for _, want := range []string{"go vet ./... [", "go run honnef.co/go/tools/cmd/staticcheck", "go test -race -timeout 30m ./...", "go vet ./... [embed]", "go test -race ./... [embed]", "-fuzz ^FuzzObserve$"} {
		if !strings.Contains(calls, want) {
			t.Errorf("no %q among the go calls:\n%s", want, calls)
		}
	}

	code, out, calls = runCI(t, "fuzz-deadline")
	if code != 0 {
		t.Fatalf(".ci/run exited %d when a fuzz run failed with nothing found and its corpus replay passed\noutput:\n%s", code, out)
	}
	if !strings.Contains(out, "deadline race") || !strings.Contains(calls, "go test -run ^FuzzObserve$ ./internal/observe") {
		t.Errorf("the deadline race was not replayed and reported:\noutput:\n%s\ngo calls:\n%s", out, calls)
	}

	code, out, _ = runCI(t, "fuzz-new")
	if code != 0 {
		t.Fatalf(".ci/run exited %d when fuzzing found new inputs (reported, not fatal)\noutput:\n%s", code, out)
	}
	if !strings.Contains(out, "FUZZING FOUND NEW FAILING INPUTS") || !strings.Contains(out, "FuzzObserve (./internal/observe)") {
		t.Errorf("the new inputs were not reported:\n%s", out)
	}
}
