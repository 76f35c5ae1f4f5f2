package profile

import (
	"os"
	"os/exec"
	"strings"

	"gopkg.in/yaml.v3"
)

// Skill is a skills/<dir>/SKILL.md file: YAML front matter and a body of
// instructions.
type Skill struct {
	// Dir is the skill's folder name.
	Dir         string
	Name        string
	Description string
	// Always-on skills are inlined into the system prompt; the others are
	// listed so the model can read them when needed.
	Always   bool
	Requires Requirements
	Body     string
}

// Requirements are what a skill needs to be offered at all.
type Requirements struct {
	Bins []string `yaml:"bins"`
	Env  []string `yaml:"env"`
}

type frontMatter struct {
	Name        string       `yaml:"name"`
	Description string       `yaml:"description"`
	Always      bool         `yaml:"always"`
	Requires    Requirements `yaml:"requires"`
	// nanobot also nests requirements under metadata.
	Metadata struct {
		Requires Requirements `yaml:"requires"`
	} `yaml:"metadata"`
}

// ParseSkill reads a SKILL.md. Without front matter the whole text is the
// body and the folder name is the skill's name.
func ParseSkill(dir, text string) Skill {
	s := Skill{Dir: dir, Name: dir, Body: strings.TrimSpace(text)}
	rest, ok := strings.CutPrefix(strings.TrimLeft(text, "\ufeff"), "---\n")
	if !ok {
		return s
	}
	head, body, ok := strings.Cut(rest, "\n---")
	if !ok {
		return s
	}
	var fm frontMatter
	if err := yaml.Unmarshal([]byte(head), &fm); err != nil {
		return s
	}
	if fm.Name != "" {
		s.Name = fm.Name
	}
	s.Description = fm.Description
	s.Always = fm.Always
	s.Requires = Requirements{
		Bins: distinct(append(fm.Requires.Bins, fm.Metadata.Requires.Bins...)),
		Env:  distinct(append(fm.Requires.Env, fm.Metadata.Requires.Env...)),
	}
	s.Body = strings.TrimSpace(strings.TrimPrefix(body, "\n"))
	return s
}

// distinct is names without repeats, in their order. A skill's file may
// come from the model (with an editable profile), and every turn checks
// every requirement: one listing "sh" 174,000 times made each turn 3 s
// longer.
func distinct(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// MaxRequirements bounds what a skill may require (binaries and
// environment variables together): a skill asking for more is not
// offered, so that a turn's check stays cheap whatever a SKILL.md says.
const MaxRequirements = 64

// Available reports whether the skill's required binaries are on PATH and
// its required environment variables are set, as lookPath and getenv see
// them; unavailable skills are hidden from the model. A skill with more
// than [MaxRequirements] is unavailable.
func (s Skill) Available(lookPath func(string) (string, error), getenv func(string) string) bool {
	if len(s.Requires.Bins)+len(s.Requires.Env) > MaxRequirements {
		return false
	}
	if lookPath == nil {
		lookPath = exec.LookPath
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	for _, b := range s.Requires.Bins {
		if _, err := lookPath(b); err != nil {
			return false
		}
	}
	for _, e := range s.Requires.Env {
		if getenv(e) == "" {
			return false
		}
	}
	return true
}
