package traincmd

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// helpDefaults returns each flag of train --help with the default it
// prints ("" when it prints none: the type's zero value).
func helpDefaults(t *testing.T) map[string]string {
	t.Helper()
	var out strings.Builder
	if _, err := parseFlags([]string{"--help"}, &out); err != errHelp {
		t.Fatalf("--help: %v", err)
	}
	flag := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)`)
	defaults := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		m := flag.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		def := ""
		if i := strings.LastIndex(line, " (default "); i >= 0 && strings.HasSuffix(line, ")") {
			def = strings.Trim(line[i+len(" (default "):len(line)-1], `"`)
		}
		defaults[m[1]] = def
	}
	return defaults
}

// sameDefault reports whether the README's default cell for one flag says
// what --help says: "off" for a zero value, durations by value, else the
// same word.
func sameDefault(readme, help string) bool {
	if readme == "off" {
		return help == "" || help == "0" || help == "false"
	}
	if help == "" {
		return readme == "0" || readme == "false"
	}
	if a, err := time.ParseDuration(readme); err == nil {
		b, err := time.ParseDuration(help)
		return err == nil && a == b
	}
	return readme == help
}

// TestREADMEFlagTable: every flag in the README's table of train's flags
// exists, and a default the table gives as one word per flag is the one
// --help prints, so that the table cannot drift from the command.
func TestREADMEFlagTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## The train command\n")
	if !ok {
		t.Fatal(`README.md has no "## The train command" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	defaults := helpDefaults(t)
	row := regexp.MustCompile("(?m)^\\| (`--[^|]*) \\| ([^|]*) \\|")
	flagName := regexp.MustCompile("`--([a-z0-9-]+)")
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) < 20 {
		t.Fatalf("%d rows of flags in the README's table, want the table's 20 or more", len(rows))
	}
	checked := 0
	for _, r := range rows {
		var names []string
		for _, m := range flagName.FindAllStringSubmatch(r[1], -1) {
			names = append(names, m[1])
		}
		for _, n := range names {
			if _, ok := defaults[n]; !ok {
				t.Errorf("README row %q: train has no flag --%s", r[1], n)
			}
		}
		cells := strings.Split(r[2], ", ")
		if len(cells) != len(names) {
			continue // one default for several flags: said in words
		}
		for i, n := range names {
			def, ok := defaults[n]
			if !ok || strings.ContainsAny(cells[i], " ;/") {
				continue // not a flag, or a default said in words
			}
			checked++
			if !sameDefault(cells[i], def) {
				t.Errorf("README: --%s defaults to %q; train --help says %q", n, cells[i], def)
			}
		}
	}
	t.Logf("%d rows, %d one-word defaults checked", len(rows), checked)
}
