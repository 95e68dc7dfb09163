//go:build testbed

package install

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docCommand is one command a user is told to run: a line of a ```sh block, its shell line
// continuations (and quoted newlines) joined, its comment apart.
type docCommand struct {
	File    string // relative to the repository's root
	Line    int    // where the command starts, from 1
	Section string // the heading it is under
	Text    string // the command, without its comment
	Comment string // the comment after it, "" when none: what the docs say it prints, or why
}

func (c docCommand) String() string { return fmt.Sprintf("%s:%d %s", c.File, c.Line, c.Text) }

// docPath is one way through the docs: sections whose commands TestDocumentedCommandsRun runs in
// order on a test bed of their own.
type docPath struct {
	Name     string
	Sections []docSection
}

// documentedPaths are the docs' ways through, each in the order the test runs it. With
// install.yaml: the install and its check first, the quick start and the user's commands on the
// installed driverset, the upgrade and the uninstall last. With Helm: the chart installed and
// `helm test`, upgraded, uninstalled (its hooks run), what is left deleted. A README section not
// named here is not read; a section of docs/install.md or docs/usage.md with a ```sh block that is
// not named here fails TestEveryDocumentedCommandIsRunOrListed.
func documentedPaths() []docPath {
	return []docPath{{"install.yaml", installYAMLSections()}, {"helm", []docSection{
		{"docs/install.md", "Install with Helm"},
		{"docs/install.md", "Upgrade with Helm"},
		{"docs/install.md", "Uninstall with Helm"},
	}}}
}

func installYAMLSections() []docSection {
	return []docSection{
		{"docs/install.md", "Install"},
		{"docs/install.md", "Other ways in"},
		{"docs/install.md", "Check the install"},
		{"docs/install.md", "Namespaced install"},
		{"docs/install.md", "TLS"},
		{"docs/install.md", "Sealed placeholders"},
		{"docs/install.md", "Fencing: the admin's bounds"},
		{"README.md", "Quick start on your own cluster"},
		{"docs/usage.md", "Opt in"},
		{"docs/usage.md", "The kubectl plugin"},
		{"docs/install.md", "Drains while driverset is down"},
		{"docs/install.md", "Upgrade"},
		{"docs/install.md", "Uninstall"},
	}
}

// wholeDocs are the files every ```sh block of which must be in a section of documentedPaths.
func wholeDocs() []string { return []string{"docs/install.md", "docs/usage.md"} }

// inlineDocs are the files whose prose commands count too: an inline `kubectl …` or `helm …`.
// (usage.md's inline spans are the plugin's syntax, `kubectl driverset list [-A]`, not commands
// to paste; its ```sh blocks hold those.)
func inlineDocs() []string { return []string{"docs/install.md"} }

// inlineCommand is a kubectl or helm command in a line's `code span`.
var inlineCommand = regexp.MustCompile("`((?:kubectl|helm) [^`]+)`")

type docSection struct{ File, Heading string }

// readDocCommands returns every command of the ```sh blocks of file, by section.
func readDocCommands(t testing.TB, file string) []docCommand {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := parseDocCommands(file, string(data), slices.Contains(inlineDocs(), file))
	if err != nil {
		t.Fatal(err)
	}
	return cmds
}

// parseDocCommands reads markdown: the headings outside code blocks, and in each ```sh block the
// commands as the shell reads them (a backslash at a line's end, or a quote still open, continues
// the command; a # after a blank, outside quotes, starts a comment); with inline, also each
// `kubectl …` or `helm …` code span of the prose.
func parseDocCommands(file, markdown string, inline bool) ([]docCommand, error) {
	var out []docCommand
	section := ""
	lines := strings.Split(markdown, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if !strings.HasPrefix(line, "```") {
			if h, ok := strings.CutPrefix(line, "#"); ok {
				section = strings.TrimSpace(strings.TrimLeft(h, "#"))
			}
			for _, m := range inlineCommand.FindAllStringSubmatch(line, -1) {
				if inline {
					out = append(out, docCommand{File: file, Line: i + 1, Section: section, Text: m[1]})
				}
			}
			continue
		}
		lang := strings.TrimSpace(strings.TrimPrefix(line, "```"))
		start := i + 1
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s:%d: a code block that never ends", file, start)
		}
		if lang != "sh" {
			continue
		}
		cmds, err := splitShell(lines[start:i])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, start, err)
		}
		for _, c := range cmds {
			c.File, c.Section, c.Line = file, section, start+c.Line+1
			out = append(out, c)
		}
	}
	return out, nil
}

// splitShell splits a block's lines into commands; Line is the index of each one's first line.
func splitShell(lines []string) ([]docCommand, error) {
	var out []docCommand
	var cmd, comment strings.Builder
	first := -1
	var quote rune
	for n, line := range lines {
		if first < 0 && strings.TrimSpace(line) == "" {
			continue
		}
		if first < 0 {
			first = n
		}
		continued := false
		rs := []rune(line)
		for k := 0; k < len(rs); k++ {
			r := rs[k]
			switch {
			case quote != 0:
				if r == quote {
					quote = 0
				}
				cmd.WriteRune(r)
			case r == '\'' || r == '"':
				quote = r
				cmd.WriteRune(r)
			case r == '\\' && k == len(rs)-1:
				continued = true
			case r == '#' && (k == 0 || rs[k-1] == ' ' || rs[k-1] == '\t'):
				comment.WriteString(strings.TrimSpace(string(rs[k+1:])))
				k = len(rs)
			default:
				cmd.WriteRune(r)
			}
		}
		if quote != 0 {
			cmd.WriteRune('\n')
			continue
		}
		if continued {
			continue
		}
		if text := strings.Join(strings.Fields(cmd.String()), " "); text != "" {
			out = append(out, docCommand{Line: first, Text: strings.TrimSpace(cmd.String()), Comment: comment.String()})
		}
		cmd.Reset()
		comment.Reset()
		first = -1
	}
	if quote != 0 || cmd.Len() > 0 {
		return nil, fmt.Errorf("a command that never ends: %q", cmd.String())
	}
	return out, nil
}

// The parser reads commands as the shell would, so that the test runs what a user pastes.
func TestParseDocCommands(t *testing.T) {
	md := "# Title\n" +
		"```sh\nkubectl a # not this\n```\n" +
		"## Part two\n" +
		"text # not a heading; run `kubectl b -n x` or `helm c`, not `make d`\n" +
		"```sh\n" +
		"kubectl run x \\\n  --labels=a=b \\\n  -o jsonpath='{.spec}' -- y   # [{\"name\":\"g\"}]\n" +
		"\n" +
		"kubectl run c --overrides='{\"spec\":\n    {\"a\":\"#1\"}}' \\\n  -- z\n" +
		"# a comment alone\n" +
		"```\n" +
		"```yaml\nnot: a command\n```\n"
	got, err := parseDocCommands("f.md", md, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []docCommand{
		{File: "f.md", Line: 3, Section: "Title", Text: "kubectl a", Comment: "not this"},
		{File: "f.md", Line: 6, Section: "Part two", Text: "kubectl b -n x"},
		{File: "f.md", Line: 6, Section: "Part two", Text: "helm c"},
		{File: "f.md", Line: 8, Section: "Part two", Text: "kubectl run x   --labels=a=b   -o jsonpath='{.spec}' -- y", Comment: `[{"name":"g"}]`},
		{File: "f.md", Line: 12, Section: "Part two", Text: "kubectl run c --overrides='{\"spec\":\n    {\"a\":\"#1\"}}'   -- z"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parsed\n%q\nwant\n%q", got, want)
	}
	if _, err := parseDocCommands("f.md", "```sh\nkubectl x 'open\n```\n", false); err == nil {
		t.Error("an unclosed quote parsed")
	}
}

// Every command in the docs the test bed reads is either run by TestDocumentedCommandsRun or
// listed in docCommandRules with why it is not, so that a command added to the docs cannot
// slip past; and every rule still matches a command, so that the list does not rot.
func TestEveryDocumentedCommandIsRunOrListed(t *testing.T) {
	var cmds []docCommand
	var sections []docSection
	for _, p := range documentedPaths() {
		cmds = append(cmds, documentedCommands(t, p.Sections)...)
		sections = append(sections, p.Sections...)
	}
	if len(cmds) == 0 {
		t.Fatal("no command read from the docs")
	}
	used := map[string]bool{}
	for _, c := range cmds {
		r, ok := ruleFor(c)
		switch {
		case !ok:
			t.Errorf("%s: neither run nor listed: run it in TestDocumentedCommandsRun (docCommandRules) or list it with the reason it is not", c)
		case r.prefix != "" && r.skip == "" && r.run == nil && !runnable(c.Text):
			t.Errorf("%s: the rule %q neither skips it nor runs it", c, r.prefix)
		}
		switch {
		case r.skip != "":
			t.Logf("%s: not run: %s", c, r.skip)
		case r.run != nil:
			t.Logf("%s: %s", c, r.why)
		case ok:
			t.Logf("%s: run", c)
		}
		if ok && r.prefix != "" {
			used[r.prefix] = true
		}
	}
	for _, r := range docCommandRules() {
		if !used[r.prefix] {
			t.Errorf("the rule %q matches no command of the docs: remove it", r.prefix)
		}
	}
	// The files read whole: no ```sh block outside the sections the test runs.
	for _, file := range wholeDocs() {
		for _, c := range readDocCommands(t, file) {
			if !slices.Contains(sections, docSection{file, c.Section}) {
				t.Errorf("%s: in section %q, which documentedPaths does not name", c, c.Section)
			}
		}
	}
}

// documentedCommands are the commands of sections, in their order.
func documentedCommands(t testing.TB, sections []docSection) []docCommand {
	t.Helper()
	var out []docCommand
	byFile := map[string][]docCommand{}
	for _, s := range sections {
		if _, ok := byFile[s.File]; !ok {
			byFile[s.File] = readDocCommands(t, s.File)
		}
		n := 0
		for _, c := range byFile[s.File] {
			if c.Section == s.Heading {
				out = append(out, c)
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%s has no commands under %q: renamed?", s.File, s.Heading)
		}
	}
	return out
}

// runnable is a command the test runs as written, in bash: kubectl (and its plugin), helm (built
// from the version e2e/go.mod pins: hack/helm-build.sh), the driverset binary, and the
// repository's own scripts.
func runnable(text string) bool {
	fields := strings.Fields(text)
	for len(fields) > 0 && strings.Contains(fields[0], "=") { // NAME=value before the program
		fields = fields[1:]
	}
	if len(fields) == 0 {
		return false
	}
	switch prog := fields[0]; {
	case prog == "kubectl", prog == "helm", prog == "driverset", prog == "kubectl-driverset", strings.HasPrefix(prog, "hack/"):
		return true
	case prog == "source": // source <(kubectl-driverset completion bash)
		return len(fields) > 1 && strings.HasPrefix(fields[1], "<(kubectl-driverset")
	}
	return false
}
