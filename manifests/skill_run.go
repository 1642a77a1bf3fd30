package manifests

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// What running a skill needs from its manifest: the command line from the
// params, the tool schema an agent fills in, and the variables expanded.

// ParamsFromArgs splits the ARGS of `kairo run skill.toml -- ARGS`. An ARG
// NAME=VALUE whose NAME is a declared param sets that param (a later one
// wins); every other ARG goes to the command, after its own words, in
// order. A second "--" ends the params: every ARG after it goes to the
// command as it is. So with a param "input",
//
//	-- input=a.mp4 -y          sets input to "a.mp4" and appends "-y"
//	-- input=a.mp4 -- input=b  sets input to "a.mp4" and appends "input=b"
//	-- if=/dev/zero            appends "if=/dev/zero" (no param "if")
func (s *Skill) ParamsFromArgs(args []string) (params map[string]string, extra []string) {
	params = map[string]string{}
	for i, a := range args {
		if a == "--" {
			return params, append(extra, args[i+1:]...)
		}
		if name, value, ok := strings.Cut(a, "="); ok {
			if _, declared := s.Params[name]; declared {
				params[name] = value
				continue
			}
		}
		extra = append(extra, a)
	}
	return params, extra
}

// Argv is the command line that runs the skill with the params in args:
// skill.command with each {name} replaced by the value of param name, or
// its default, then extra (what the user wrote after the params).
//
// A placeholder may be a whole word or part of one ("--out={output}"). A
// word that holds an optional param that was not given and has no default
// is left out, so "--level={level}" disappears with its param. {{name}} is
// the literal text {name}. $SKILL_DIR in the command's words is s.Dir; the
// values of params and extra are used as they are.
//
// A value is checked against its param's type and enum. Every problem
// (a param missing, unknown or of the wrong type) is reported, joined.
func (s *Skill) Argv(args map[string]string, extra []string) ([]string, error) {
	argv, _, err := s.argv(args, extra, false)
	return argv, err
}

// ArgvTemplate is Argv for a command shown, not run (kairo run --explain):
// a required param not given stays its placeholder, {name}, and is named
// in unset; a value given is checked as Argv checks it.
func (s *Skill) ArgvTemplate(args map[string]string, extra []string) (argv, unset []string, err error) {
	return s.argv(args, extra, true)
}

func (s *Skill) argv(args map[string]string, extra []string, template bool) ([]string, []string, error) {
	var errs []error
	var unset []string
	for _, name := range sortedKeys(args) {
		if _, ok := s.Params[name]; !ok {
			errs = append(errs, fmt.Errorf("skill %s has no param %q; it takes %s", s.Skill.Name, name, s.paramNames()))
		}
	}
	values := map[string]string{}
	for _, name := range sortedKeys(s.Params) {
		p := s.Params[name]
		v, ok := args[name]
		switch {
		case ok:
		case p.Default != nil:
			v = formatValue(p.Default)
		case p.Required && template:
			values[name] = "{" + name + "}"
			unset = append(unset, name)
			continue
		case p.Required:
			errs = append(errs, fmt.Errorf("skill %s needs param %q%s", s.Skill.Name, name, p.about()))
			continue
		default:
			continue
		}
		if err := p.checkValue(v, true); err != nil {
			errs = append(errs, fmt.Errorf("param %q%s: %w", name, p.about(), err))
			continue
		}
		values[name] = v
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	vars := map[string]string{VarSkillDir: s.Dir}
	argv := make([]string, 0, len(s.Skill.Command)+len(extra))
	for _, word := range s.Skill.Command {
		if w, ok := fillWord(word, values, vars); ok {
			argv = append(argv, w)
		}
	}
	return append(argv, extra...), unset, nil
}

// fillWord expands the variables in the text of one command word and puts
// the values in its placeholders. ok is false when the word names a param
// that has no value.
func fillWord(word string, values, vars map[string]string) (string, bool) {
	var b strings.Builder
	last := 0
	for _, m := range placeholderRE.FindAllStringSubmatchIndex(word, -1) {
		b.WriteString(expand(word[last:m[0]], vars))
		last = m[1]
		if m[2] >= 0 { // {{name}}
			b.WriteString(word[m[0]+1 : m[1]-1])
			continue
		}
		v, ok := values[word[m[4]:m[5]]]
		if !ok {
			return "", false
		}
		b.WriteString(v)
	}
	b.WriteString(expand(word[last:], vars))
	return b.String(), true
}

func (s *Skill) paramNames() string {
	if len(s.Params) == 0 {
		return "none"
	}
	return strings.Join(sortedKeys(s.Params), ", ")
}

// about is the param's description in parentheses, for an error.
func (p Param) about() string {
	if p.Description == "" {
		return ""
	}
	return " (" + p.Description + ")"
}

// checkValue says what is wrong with v as a value of p; withEnum checks it
// against the enum too.
func (p Param) checkValue(v string, withEnum bool) error {
	switch p.Type {
	case ParamInteger:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
	case ParamNumber:
		if f, err := strconv.ParseFloat(v, 64); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("%q is not a number", v)
		}
	case ParamBoolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not true or false", v)
		}
	}
	if withEnum && len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
		return fmt.Errorf("%q is not one of %s", v, quoteAll(p.Enum))
	}
	return nil
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// JSONSchema is the schema of the skill's params as an agent's tool
// (OpenAI function) parameters: an object whose properties are the params,
// with their type, description, enum and default, and the required ones
// listed, sorted.
func (s *Skill) JSONSchema() map[string]any {
	props := map[string]any{}
	var required []string
	for name, p := range s.Params {
		prop := map[string]any{"type": p.Type}
		if p.Description != "" {
			prop["description"] = p.Description
		}
		if len(p.Enum) > 0 {
			enum := make([]any, len(p.Enum))
			for i, v := range p.Enum {
				enum[i] = typedValue(p.Type, v)
			}
			prop["enum"] = enum
		}
		if p.Default != nil {
			prop["default"] = p.Default
		}
		props[name] = prop
		if p.Required {
			required = append(required, name)
		}
	}
	schema := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		slices.Sort(required)
		schema["required"] = required
	}
	return schema
}

// typedValue is v, a valid value of a param of type typ, as JSON holds it.
func typedValue(typ, v string) any {
	switch typ {
	case ParamInteger:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case ParamNumber:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	case ParamBoolean:
		return v == "true"
	}
	return v
}

// ExpandPath is p, a path of the manifest (or a value of env.set), with
// each $SKILL_DIR, $WORK and $TMP (or ${SKILL_DIR}, ...) replaced by its
// value in vars, whose keys are [VarSkillDir], [VarWork] and [VarTmp];
// SKILL_DIR defaults to s.Dir. A variable vars does not give stays as it
// is: "$WORK/out" remains a relative path, which grants nothing, rather
// than becoming "/out".
func (s *Skill) ExpandPath(p string, vars map[string]string) string {
	if _, ok := vars[VarSkillDir]; !ok && s.Dir != "" {
		vars = maps.Clone(vars)
		if vars == nil {
			vars = map[string]string{}
		}
		vars[VarSkillDir] = s.Dir
	}
	return expand(p, vars)
}

// expand replaces each $SKILL_DIR, $WORK and $TMP (or ${SKILL_DIR}, ...)
// in s that vars gives a value for; any other "$" stays as it is.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		name, rest, ok := splitVar(s[i:])
		if v := vars[name]; ok && v != "" && isPathVar(name) {
			b.WriteString(v)
			s = rest
			continue
		}
		b.WriteByte('$')
		s = s[i+1:]
	}
}

// splitVar splits s, which starts with "$", into the name of its leading
// variable ($NAME or ${NAME}) and what follows it. ok is false when no
// name follows the "$".
func splitVar(s string) (name, rest string, ok bool) {
	if strings.HasPrefix(s, "${") {
		end := strings.IndexByte(s, '}')
		if end < 0 || !identRE.MatchString(s[2:end]) {
			return "", s, false
		}
		return s[2:end], s[end+1:], true
	}
	i := 1
	for i < len(s) && (s[i] == '_' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= 'a' && s[i] <= 'z' || i > 1 && s[i] >= '0' && s[i] <= '9') {
		i++
	}
	return s[1:i], s[i:], i > 1
}

// firstVar is the name of the first variable ($NAME or ${NAME}) in s
// that match accepts, or "".
func firstVar(s string, match func(name string) bool) string {
	for i := strings.IndexByte(s, '$'); i >= 0; {
		if name, _, ok := splitVar(s[i:]); ok && match(name) {
			return name
		}
		j := strings.IndexByte(s[i+1:], '$')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	return ""
}

func isPathVar(name string) bool { return slices.Contains(pathVars, name) }
