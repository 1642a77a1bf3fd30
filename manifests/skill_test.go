package manifests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// transcode is the manifest of the issue that introduced skills, every
// table in use.
const transcode = `[skill]
name = "transcode"
version = "0.1.0"
description = "Transcode a video"
command = ["/usr/bin/ffmpeg", "-i", "{input}", "--crf={crf}", "{output}"]

[params.input]
type = "string"
description = "path of the source video"

[params.output]
description = "path of the result"
default = "out.mp4"

[params.crf]
type = "integer"
required = false
enum = ["18", "23", "28"]

[fs]
read = ["/usr", "/lib", "/etc/ssl/certs"]
write = ["$WORK"]
exec = ["/usr/bin/ffmpeg"]

[net]
connect_tcp = [443]
bind_tcp = []
udp = false
unix = ["$TMP/agent.sock"]

[ipc]                       # empty = none
call = ["events.publish"]
publish = []
subscribe = ["kairo.process.>"]

[env]
pass = ["LANG"]
set = { HOME = "$WORK", CACHE = "${TMP}/cache" }

[limits]
cpu_seconds = 600
wall_seconds = 3600
memory = "1GiB"
processes = 64
file_size = "4GiB"
open_files = 256
output_bytes = "1GiB"
output_rate = "256KiB/s"

[sandbox]
min_landlock_abi = 6
pty = false

[[progress]]
pattern = 'time=(?P<time>\S+)'

[[progress]]
pattern = 'frame=\s*(?P<frame>\d+)'
`

func writeSkill(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skill.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadSkill(t *testing.T) {
	path := writeSkill(t, transcode)
	s, err := LoadSkill(path)
	if err != nil {
		t.Fatalf("LoadSkill: %v", err)
	}
	if s.File != path || s.Dir != filepath.Dir(path) {
		t.Errorf("File, Dir = %q, %q; want %q, %q", s.File, s.Dir, path, filepath.Dir(path))
	}
	if s.Skill.Name != "transcode" || s.Skill.Version != "0.1.0" || len(s.Skill.Command) != 5 {
		t.Errorf("[skill] = %+v", s.Skill)
	}
	wantParams := map[string]Param{
		"input":  {Type: "string", Description: "path of the source video", Required: true},
		"output": {Type: "string", Description: "path of the result", Default: "out.mp4"},
		"crf":    {Type: "integer", Enum: []string{"18", "23", "28"}},
	}
	if !reflect.DeepEqual(s.Params, wantParams) {
		t.Errorf("Params = %+v\nwant %+v", s.Params, wantParams)
	}
	if !slices.Equal(s.Net.ConnectTCP, []uint16{443}) || s.Net.UDP || !slices.Equal(s.Net.Unix, []string{"$TMP/agent.sock"}) {
		t.Errorf("[net] = %+v", s.Net)
	}
	if s.Env.Set["CACHE"] != "${TMP}/cache" || !slices.Equal(s.Env.Pass, []string{"LANG"}) {
		t.Errorf("[env] = %+v", s.Env)
	}
	wantLimits := SkillLimits{
		CPUSeconds: 600, WallSeconds: 3600, Memory: GiB, Processes: 64,
		FileSize: 4 * GiB, OpenFiles: 256, OutputBytes: GiB, OutputRate: 256 * 1024,
	}
	if s.Limits != wantLimits {
		t.Errorf("[limits] = %+v\nwant %+v", s.Limits, wantLimits)
	}
	if s.Sandbox != (SkillSandbox{MinLandlockABI: 6}) {
		t.Errorf("[sandbox] = %+v", s.Sandbox)
	}
	if len(s.Progress) != 2 || s.Progress[0].Regexp() == nil || s.Progress[1].Regexp() == nil {
		t.Fatalf("[[progress]] = %+v", s.Progress)
	}
	if m := s.Progress[1].Regexp().FindStringSubmatch("frame=  120 fps=30"); len(m) != 2 || m[1] != "120" {
		t.Errorf("progress[1] matched %q", m)
	}
}

func TestParseSkillMinimal(t *testing.T) {
	s, err := ParseSkill("true/skill.toml", []byte("[skill]\nname = \"true\"\ncommand = [\"/usr/bin/true\"]\n[fs]\nexec = [\"/usr/bin\"]\n"))
	if err != nil {
		t.Fatalf("ParseSkill: %v", err)
	}
	if !filepath.IsAbs(s.Dir) || filepath.Base(s.Dir) != "true" {
		t.Errorf("Dir = %q, want the absolute folder of the file", s.Dir)
	}
	if s.Params != nil || s.FS.Read != nil || s.Limits != (SkillLimits{}) || s.Progress != nil {
		t.Errorf("a minimal skill grants or limits something: %+v", s)
	}
}

// skillHead is a valid manifest on lines 1 to 6, ending in [fs], for the
// error cases to add to.
const skillHead = `[skill]
name = "t"
command = ["/usr/bin/tool", "{file}"]
[params.file]
[fs]
exec = ["/usr/bin/tool"]
`

func TestParseSkillErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int    // 0: no line expected
		key        string // expected Error.Key
		want       string // regexp the message must match
	}{
		// What decoding finds: syntax, unknown keys, wrong types.
		{"syntax", skillHead + "[net]\nudp = tru\n", 8, "net.udp", `TOML syntax`},
		{"unknown table", skillHead + "[network]\nudp = true\n", 7, "network",
			`unknown table or key; .*takes \[skill\], \[params\], \[fs\], \[net\], \[ipc\], \[env\], \[limits\], \[sandbox\], \[\[progress\]\], \[approval\], \[secrets\]\)`},
		{"unknown key", "[skill]\nname = \"t\"\ncomand = [\"/bin/true\"]\n", 3, "skill.comand",
			`unknown key; check its spelling or remove it \(\[skill\] takes name, version, description, command\)`},
		{"unknown key in a param", "[skill]\nname = \"t\"\n[params.file]\ntype = \"string\"\nrequierd = true\n", 5, "params.file.requierd",
			`unknown key; .*\(\[params.file\] takes type, description, required, default, enum\)`},
		{"unknown key in the second progress", skillHead + "[[progress]]\npattern = '(?P<a>a)'\n[[progress]]\npatern = 'b'\n", 10, "progress.patern",
			`unknown key; .*\(\[\[progress\]\] takes pattern\)`},
		{"unknown key in [env]", skillHead + "[env]\nset = {}\nunset = [\"X\"]\n", 9, "env.unset", `\[env\] takes pass, set\)`},
		{"int for string", "[skill]\nname = 3\n", 2, "skill.name", `3 is an integer, want a string`},
		{"string for array", skillHead + "[net]\nunix = \"/run/x.sock\"\n", 8, "net.unix", `"/run/x.sock" is a string, want an array`},
		{"int in a path array", skillHead + "read = [\"/usr\", 3]\n", 7, "fs.read[1]", `3 is an integer, want a string`},
		{"string for bool", skillHead + "[sandbox]\npty = \"yes\"\n", 8, "sandbox.pty", `"yes" is a string, want true or false`},
		{"quoted port", skillHead + "[net]\nconnect_tcp = [\"443\"]\n", 8, "net.connect_tcp[0]", `want an integer: write it without quotes`},
		{"port too large", skillHead + "[net]\nconnect_tcp = [443, 70000]\n", 8, "net.connect_tcp[1]", `70000 is out of range; want an integer from 0 to 65535`},
		{"negative port", skillHead + "[net]\nbind_tcp = [-1]\n", 8, "net.bind_tcp[0]", `-1 is out of range`},
		{"string for a param table", skillHead + "[params]\nmode = \"fast\"\n", 8, "params.mode", `"fast" is a string, want a table`},
		{"table for a default", skillHead + "[params.x]\ndefault = { a = 1 }\n", 8, "params.x.default", `the value is a table, want a string, a number or true or false`},
		{"int in an enum", skillHead + "[params.x]\nenum = [\"a\", 2]\n", 8, "params.x.enum[1]", `2 is an integer, want a string`},
		{"int in env.set", skillHead + "[env]\nset = { HOME = 1 }\n", 8, "env.set.HOME", `1 is an integer, want a string`},
		{"pattern type in the second progress", skillHead + "[[progress]]\npattern = 'a'\n\n[[progress]]\npattern = 3\n", 11, "progress[1].pattern", `3 is an integer, want a string`},
		{"int in an inline progress table", "progress = [{ pattern = '(?P<a>a)' }, { pattern = 3 }]\n" + skillHead, 1, "progress[1].pattern", `3 is an integer, want a string`},
		{"array in a path array", skillHead + "read = [[\"/usr\"]]\n", 7, "fs.read[0]", `the value is an array, want a string`},
		{"bad size", skillHead + "[limits]\nmemory = \"1 gigabyte\"\n", 8, "limits.memory", `unknown unit "gigabyte"`},
		{"rate without /s", skillHead + "[limits]\noutput_rate = \"256KiB\"\n", 8, "limits.output_rate", `want a size per second, such as "256KiB/s"`},
		{"bool for rate", skillHead + "[limits]\noutput_rate = true\n", 8, "limits.output_rate", `true is a boolean, want a rate such as "256KiB/s"`},

		// [skill]
		{"no name", "[skill]\ncommand = [\"/bin/true\"]\n[fs]\nexec = [\"/bin/true\"]\n", 1, "skill.name", `is missing; name the skill`},
		{"no skill table", "[fs]\nread = [\"/usr\"]\n", 0, "skill.name", `is missing`},
		{"bad name", "[skill]\nname = \"Trans Code\"\ncommand = [\"/bin/true\"]\n[fs]\nexec = [\"/bin\"]\n", 2, "skill.name",
			`"Trans Code" is not a skill name; use lower-case letters, .* such as "trans-code"`},
		{"long name", "[skill]\nname = \"" + strings.Repeat("a", 65) + "\"\ncommand = [\"/bin/true\"]\n[fs]\nexec = [\"/bin\"]\n", 2, "skill.name", `is 65 bytes long`},
		{"no command", "[skill]\nname = \"t\"\n", 1, "skill.command", `is missing; give the program and its arguments`},
		{"empty command", "[skill]\nname = \"t\"\n\ncommand = []\n", 4, "skill.command", `is missing`},
		{"relative program", "[skill]\nname = \"t\"\ncommand = [\"ffmpeg\", \"-i\"]\n", 3, "skill.command[0]",
			`"ffmpeg" is not an absolute path; give the program's path, such as "/usr/bin/ffmpeg" .* or "\$SKILL_DIR/ffmpeg"`},
		{"program in $WORK", "[skill]\nname = \"t\"\ncommand = [\"$WORK/tool\"]\n", 3, "skill.command[0]", `the skill may write \$WORK`},
		{"program is $SKILL_DIR", "[skill]\nname = \"t\"\ncommand = [\"$SKILL_DIR\"]\n", 3, "skill.command[0]", `its path under \$SKILL_DIR, such as "\$SKILL_DIR/run.sh"`},
		{"program goes up", "[skill]\nname = \"t\"\ncommand = [\"$SKILL_DIR/../x\"]\n[fs]\nexec = [\"$SKILL_DIR\"]\n", 3, "skill.command[0]", `goes up with ".."`},
		{"program is a param", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/{tool}\"]\n[params.tool]\n", 3, "skill.command[0]", `the program cannot be a param \({tool}\)`},
		{"program not in fs.exec", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\"]\n[fs]\nexec = [\"/usr/bin/tool2\"]\n", 3, "skill.command[0]",
			`"/usr/bin/tool" is not in fs.exec, so the sandbox would not run it; add it to fs.exec`},
		{"undeclared placeholder", "[skill]\nname = \"t\"\ncommand = [\n  \"/usr/bin/tool\",\n  \"--out={outptu}\",\n]\n[params.output]\n", 3, "skill.command[1]",
			`{outptu} is not a declared param; declare \[params.outptu\], fix the spelling \(params: output\), or write {{outptu}} for the literal text`},
		{"$WORK in the command", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"$WORK/out\"]\n[fs]\nexec = [\"/usr/bin\"]\n", 3, "skill.command[1]",
			`"\$WORK/out": \$WORK is not expanded in the command; the command runs in \$WORK, so write a path relative to it, such as "out"`},
		{"$TMP in the command", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"-T\", \"${TMP}\"]\n[fs]\nexec = [\"/usr/bin\"]\n", 3, "skill.command[2]", `TMPDIR`},

		// [params]
		{"unused param", skillHead + "[params.extra]\ntype = \"string\"\n", 7, "params.extra", `is not used in skill.command; put {extra} where its value goes`},
		{"bad param type", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{n}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.n]\ntype = \"int\"\n", 7, "params.n.type",
			`"int" is not a param type; want "string", "integer", "number" or "boolean"`},
		{"bad param name", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.\"out-file\"]\n", 6, "params.out-file",
			`"out-file" is not a param name`},
		{"default of the wrong type", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{n}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.n]\ntype = \"integer\"\ndefault = \"10\"\n", 8, "params.n.default",
			`"10" is a string, but the param is of type "integer"; write an integer such as 10`},
		{"default not in enum", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{m}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.m]\nenum = [\"a\", \"b\"]\ndefault = \"c\"\n", 8, "params.m.default",
			`"c" is not one of "a", "b"`},
		{"enum value of the wrong type", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{n}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.n]\ntype = \"number\"\nenum = [\"0.5\", \"half\"]\n", 8, "params.n.enum[1]",
			`"half" is not a number`},
		{"empty enum", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{m}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.m]\nenum = []\n", 7, "params.m.enum", `is empty, which allows no value`},
		{"required with a default", "[skill]\nname = \"t\"\ncommand = [\"/usr/bin/tool\", \"{m}\"]\n[fs]\nexec = [\"/usr/bin/tool\"]\n[params.m]\nrequired = true\ndefault = \"x\"\n", 7, "params.m.required",
			`a param with a default is never missing`},

		// [fs], [net], [ipc]
		{"relative read", skillHead + "read = [\"/usr\", \"usr/lib\"]\n", 7, "fs.read[1]",
			`"usr/lib" is relative; give an absolute path, or start it with \$SKILL_DIR \(the skill's folder\), \$WORK \(the run's workspace\) or \$TMP \(its temporary folder\), such as "\$WORK/usr/lib"`},
		{"unknown variable", skillHead + "write = [\"$HOME/out\"]\n", 7, "fs.write[0]", `"\$HOME/out": \$HOME is not a variable a path may use; start it with \$SKILL_DIR .*, \$WORK .* or \$TMP`},
		{"variable run on", skillHead + "write = [\"$WORKDIR\"]\n", 7, "fs.write[0]", `\$WORKDIR is not a variable a path may use`},
		{"variable then no slash", skillHead + "write = [\"${WORK}out\"]\n", 7, "fs.write[0]", `put a / after \$WORK`},
		{"dot dot", skillHead + "read = [\"$WORK/../..\"]\n", 7, "fs.read[0]", `goes up with ".."; name the folder itself`},
		{"variable inside", skillHead + "read = [\"/home/$USER\"]\n", 7, "fs.read[0]", `only a leading \$SKILL_DIR, \$WORK or \$TMP is expanded`},
		{"empty path", skillHead + "write = [\"/tmp\", \"\"]\n", 7, "fs.write[1]", `is empty; give an absolute path`},
		{"port 0", skillHead + "[net]\nbind_tcp = [8080, 0]\n", 8, "net.bind_tcp[1]", `0 is not a port; give a port from 1 to 65535`},
		{"relative unix socket", skillHead + "[net]\nunix = [\"agent.sock\"]\n", 8, "net.unix[0]", `"agent.sock" is relative`},
		{"host as a URL", skillHead + "[net]\nhosts = [\"api.github.com:443\", \"https://pypi.org\"]\n", 8, "net.hosts[1]",
			`^"https://pypi.org": a host, not a URL.*an entry is a host name, \*\.suffix or an IP literal.*such as "api.github.com:443" or "\*.pythonhosted.org"$`},
		{"host port 0", skillHead + "[net]\nudp = false\nhosts = [\"api.github.com:0\"]\n", 9, "net.hosts[0]", `"api.github.com:0": port "0" is not a number from 1 to 65535`},
		{"host wildcard inside", skillHead + "[net]\nhosts = [\"files.*.org\"]\n", 8, "net.hosts[0]", `'\*' is allowed only as the whole first label`},
		{"empty host", skillHead + "[net]\nhosts = [\"\"]\n", 8, "net.hosts[0]", `"": empty entry`},
		{"unknown key in [net]", skillHead + "[net]\nhost = [\"pypi.org\"]\n", 8, "net.host", `\[net\] takes connect_tcp, bind_tcp, udp, unix, hosts\)`},
		{"after a table header with a comment", skillHead + "[ipc]   # none\ncall = [\"\"]\n", 8, "ipc.call[0]", `"" is not a kernel method`},
		{"empty method", skillHead + "[ipc]\ncall = [\"events.publish\", \"\"]\n", 8, "ipc.call[1]", `"" is not a kernel method`},
		{"subject with a space", skillHead + "[ipc]\nsubscribe = [\"kairo process\"]\n", 8, "ipc.subscribe[0]", `is not a subject or pattern; write one without spaces`},

		// [env]
		{"bad pass name", skillHead + "[env]\npass = [\"LANG\", \"1X\"]\n", 8, "env.pass[1]", `"1X" is not an environment variable name`},
		{"bad set name", skillHead + "[env]\nset = { \"A-B\" = \"x\" }\n", 8, "env.set.A-B", `"A-B" is not an environment variable name`},
		{"quoted set name", skillHead + "[env]\nset = { \"A B\" = \"x\" }\n", 8, `env.set."A B"`, `"A B" is not an environment variable name`},
		{"unknown variable in set", skillHead + "[env]\n\nset = { PATH = \"$PATH:/opt/bin\" }\n", 9, "env.set.PATH", `\$PATH is not expanded here, .* list it in env.pass`},
		{"passed and set", skillHead + "[env]\npass = [\"HOME\"]\nset = { HOME = \"$WORK\" }\n", 8, "env.pass[0]", `HOME is also in env.set, which would win; keep one`},

		// [limits], [sandbox]
		{"negative limit", skillHead + "[limits]\ncpu_seconds = -1\n", 8, "limits.cpu_seconds", `-1 is negative; give a limit of at least 1, or leave the key out for none`},
		{"zero limit", skillHead + "[limits]\nwall_seconds = 60\nprocesses = 0\n", 9, "limits.processes", `0 is not a limit; give at least 1, or leave the key out for none`},
		{"zero size", skillHead + "[limits]\noutput_bytes = 0\n", 8, "limits.output_bytes", `0 is not a limit; leave the key out for none`},
		{"zero rate", skillHead + "[limits]\noutput_rate = \"0B/s\"\n", 8, "limits.output_rate", `0 is not a limit`},
		{"tiny memory", skillHead + "[limits]\nmemory = 4096\n", 8, "limits.memory", `4KiB is too little to start a program; give at least 1MiB`},
		{"negative abi", skillHead + "[sandbox]\nmin_landlock_abi = -1\n", 8, "sandbox.min_landlock_abi", `-1 is negative`},

		// [[progress]]
		{"pattern does not compile", skillHead + "[[progress]]\npattern = '(?P<a>\\d+)'\n[[progress]]\n\npattern = 'time=(\\S+'\n", 11, "progress[1].pattern",
			`"time=\(\\\\S\+" does not compile: .*missing closing \)`},
		{"pattern without a named group", skillHead + "[[progress]]\npattern = '(\\d+)%'\n", 8, "progress[0].pattern",
			`has no named group; name what it captures, such as 'progress=\(\?P<percent>\\d\+\)%'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeSkill(t, tc.text)
			s, err := LoadSkill(path)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("LoadSkill: skill %v, error %v (%T), want a *manifests.Error", s, err, err)
			}
			if s != nil {
				t.Errorf("LoadSkill returned a skill with its error")
			}
			if e.File != path || e.Line != tc.line || e.Key != tc.key {
				t.Errorf("error at %s:%d key %q, want %s:%d key %q\n(%v)", e.File, e.Line, e.Key, path, tc.line, tc.key, err)
			}
			if !regexp.MustCompile(tc.want).MatchString(e.Msg) {
				t.Errorf("message %q does not match %q", e.Msg, tc.want)
			}
			// Every error reads "file:line: key: message".
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, path+":") {
					t.Errorf("error line %q does not start with %q", line, path+":")
				}
			}
		})
	}
}

func TestParseSkillReportsEveryProblem(t *testing.T) {
	text := `[skill]
name = "Bad Name"
command = ["tool", "{missing}"]

[fs]
read = ["relative"]

[limits]
processes = -3
`
	_, err := ParseSkill("x/skill.toml", []byte(text))
	if err == nil {
		t.Fatal("ParseSkill accepted a manifest with four problems")
	}
	got := err.Error()
	want := []string{
		"x/skill.toml:2: skill.name:",
		"x/skill.toml:3: skill.command[1]: {missing} is not a declared param",
		"x/skill.toml:3: skill.command[0]: \"tool\" is not an absolute path",
		"x/skill.toml:6: fs.read[0]:",
		"x/skill.toml:9: limits.processes:",
	}
	lines := strings.Split(got, "\n")
	if len(lines) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(lines), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want it to start with %q", i, lines[i], w)
		}
	}
}

func TestParseSkillDefaults(t *testing.T) {
	s, err := ParseSkill("s/skill.toml", []byte(`[skill]
name = "d"
command = ["/usr/bin/tool", "{a}", "{b}", "{c}", "{d}", "{e}"]
[fs]
exec = ["/usr/bin/tool"]
[params.a]
[params.b]
required = false
[params.c]
type = "number"
default = 2
[params.d]
type = "boolean"
default = false
[params.e]
type = "integer"
default = 7
required = false
`))
	if err != nil {
		t.Fatalf("ParseSkill: %v", err)
	}
	for _, tc := range []struct {
		name     string
		required bool
		def      any
	}{
		{"a", true, nil}, {"b", false, nil}, {"c", false, float64(2)}, {"d", false, false}, {"e", false, int64(7)},
	} {
		p := s.Params[tc.name]
		if p.Required != tc.required || p.Default != tc.def {
			t.Errorf("param %s: required %v default %#v; want %v %#v", tc.name, p.Required, p.Default, tc.required, tc.def)
		}
	}
	if s.Params["a"].Type != ParamString {
		t.Errorf("a param without a type is %q, want %q", s.Params["a"].Type, ParamString)
	}
}

// argvSkill is a skill whose command uses every kind of placeholder.
const argvSkill = `[skill]
name = "argv"
command = ["$SKILL_DIR/run.sh", "-i", "{input}", "--out={output}", "--level={level}", "-n", "{n}", "--ratio={ratio}", "{{input}}", "--fast={fast}", "$HOME", "{mode}"]
[fs]
exec = ["$SKILL_DIR/run.sh"]
[params.input]
description = "the source file"
[params.output]
default = "out.txt"
[params.level]
type = "integer"
required = false
[params.n]
type = "integer"
default = 3
[params.ratio]
type = "number"
default = 0.5
[params.fast]
type = "boolean"
default = true
[params.mode]
enum = ["fast", "slow"]
default = "slow"
`

func TestArgv(t *testing.T) {
	s, err := ParseSkill("/skills/argv/skill.toml", []byte(argvSkill))
	if err != nil {
		t.Fatalf("ParseSkill: %v", err)
	}
	for _, tc := range []struct {
		name  string
		args  map[string]string
		extra []string
		want  []string
	}{
		{"defaults", map[string]string{"input": "a b.txt"}, nil,
			[]string{"/skills/argv/run.sh", "-i", "a b.txt", "--out=out.txt", "-n", "3", "--ratio=0.5", "{input}", "--fast=true", "$HOME", "slow"}},
		{"every param given", map[string]string{"input": "{output}", "output": "$WORK/x", "level": "-2", "n": "10", "ratio": "1e3", "fast": "false", "mode": "fast"}, []string{"--", "-v"},
			[]string{"/skills/argv/run.sh", "-i", "{output}", "--out=$WORK/x", "--level=-2", "-n", "10", "--ratio=1e3", "{input}", "--fast=false", "$HOME", "fast", "--", "-v"}},
		{"empty value", map[string]string{"input": ""}, []string{"x"},
			[]string{"/skills/argv/run.sh", "-i", "", "--out=out.txt", "-n", "3", "--ratio=0.5", "{input}", "--fast=true", "$HOME", "slow", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Argv(tc.args, tc.extra)
			if err != nil {
				t.Fatalf("Argv: %v", err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("Argv =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestArgvErrors(t *testing.T) {
	s, err := ParseSkill("/skills/argv/skill.toml", []byte(argvSkill))
	if err != nil {
		t.Fatalf("ParseSkill: %v", err)
	}
	for _, tc := range []struct {
		name string
		args map[string]string
		want []string
	}{
		{"missing", map[string]string{}, []string{`skill argv needs param "input" (the source file)`}},
		{"unknown", map[string]string{"input": "a", "inptu": "b"}, []string{`skill argv has no param "inptu"; it takes fast, input, level, mode, n, output, ratio`}},
		{"not an integer", map[string]string{"input": "a", "n": "3.5"}, []string{`param "n": "3.5" is not an integer`}},
		{"not a number", map[string]string{"input": "a", "ratio": "NaN"}, []string{`param "ratio": "NaN" is not a number`}},
		{"not a boolean", map[string]string{"input": "a", "fast": "yes"}, []string{`param "fast": "yes" is not true or false`}},
		{"not in enum", map[string]string{"input": "a", "mode": "Fast"}, []string{`param "mode": "Fast" is not one of "fast", "slow"`}},
		{"several", map[string]string{"n": "x", "level": "y"}, []string{`needs param "input"`, `param "level": "y" is not an integer`, `param "n": "x" is not an integer`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv, err := s.Argv(tc.args, nil)
			if err == nil {
				t.Fatalf("Argv = %q, want an error", argv)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParamsFromArgs(t *testing.T) {
	s, err := ParseSkill("/s/skill.toml", []byte(argvSkill))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		params map[string]string
		extra  []string
	}{
		{nil, map[string]string{}, nil},
		{[]string{"input=a.mp4", "-y", "output=b=c", "input=z"}, map[string]string{"input": "z", "output": "b=c"}, []string{"-y"}},
		{[]string{"if=/dev/zero", "n=", "plain"}, map[string]string{"n": ""}, []string{"if=/dev/zero", "plain"}},
		{[]string{"input=a", "--", "input=b", "--"}, map[string]string{"input": "a"}, []string{"input=b", "--"}},
		{[]string{"--", "n=1"}, map[string]string{}, []string{"n=1"}},
	} {
		params, extra := s.ParamsFromArgs(tc.args)
		if !reflect.DeepEqual(params, tc.params) || !slices.Equal(extra, tc.extra) {
			t.Errorf("ParamsFromArgs(%q) = %q, %q; want %q, %q", tc.args, params, extra, tc.params, tc.extra)
		}
	}
}

func TestJSONSchema(t *testing.T) {
	s, err := ParseSkill("/s/skill.toml", []byte(argvSkill))
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(s.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{` +
		`"fast":{"default":true,"type":"boolean"},` +
		`"input":{"description":"the source file","type":"string"},` +
		`"level":{"type":"integer"},` +
		`"mode":{"default":"slow","enum":["fast","slow"],"type":"string"},` +
		`"n":{"default":3,"type":"integer"},` +
		`"output":{"default":"out.txt","type":"string"},` +
		`"ratio":{"default":0.5,"type":"number"}},` +
		`"required":["input"],"type":"object"}`
	if string(got) != want {
		t.Errorf("JSONSchema =\n%s\nwant\n%s", got, want)
	}

	two, err := ParseSkill("/s/skill.toml", []byte(`[skill]
name = "two"
command = ["/usr/bin/x", "{zeta}", "{alpha}", "{n}"]
[fs]
exec = ["/usr/bin/x"]
[params.zeta]
[params.alpha]
[params.n]
type = "integer"
enum = ["1", "2"]
`))
	if err != nil {
		t.Fatal(err)
	}
	schema := two.JSONSchema()
	if req := schema["required"]; !reflect.DeepEqual(req, []string{"alpha", "n", "zeta"}) {
		t.Errorf("required = %v, want sorted", req)
	}
	enum := schema["properties"].(map[string]any)["n"].(map[string]any)["enum"]
	if !reflect.DeepEqual(enum, []any{int64(1), int64(2)}) {
		t.Errorf("integer enum = %#v, want integers", enum)
	}

	none, err := ParseSkill("/s/skill.toml", []byte("[skill]\nname = \"none\"\ncommand = [\"/usr/bin/x\"]\n[fs]\nexec = [\"/usr/bin/x\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(none.JSONSchema()); string(got) != `{"additionalProperties":false,"properties":{},"type":"object"}` {
		t.Errorf("JSONSchema without params = %s", got)
	}
}

func TestExpandPath(t *testing.T) {
	s := &Skill{Dir: "/skills/x"}
	vars := map[string]string{VarWork: "/run/w", VarTmp: "/run/t"}
	for _, tc := range []struct{ in, want string }{
		{"/usr/lib", "/usr/lib"},
		{"$SKILL_DIR", "/skills/x"},
		{"$SKILL_DIR/run.sh", "/skills/x/run.sh"},
		{"${SKILL_DIR}/run.sh", "/skills/x/run.sh"},
		{"$WORK/out", "/run/w/out"},
		{"$TMP", "/run/t"},
		{"$WORKDIR/x", "$WORKDIR/x"},
		{"a$b $ $1", "a$b $ $1"},
	} {
		if got := s.ExpandPath(tc.in, vars); got != tc.want {
			t.Errorf("ExpandPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A variable without a value stays: "$WORK/out" must not become "/out".
	if got := s.ExpandPath("$WORK/out", nil); got != "$WORK/out" {
		t.Errorf("ExpandPath without WORK = %q, want it unexpanded", got)
	}
	if got := s.ExpandPath("$SKILL_DIR/a", map[string]string{VarSkillDir: "/other"}); got != "/other/a" {
		t.Errorf("ExpandPath with SKILL_DIR given = %q", got)
	}
	if vars[VarSkillDir] != "" {
		t.Errorf("ExpandPath changed the caller's vars: %v", vars)
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
	}{
		{"256KiB/s", 256 << 10},
		{"256kib/S", 256 << 10},
		{"1MB/s", 1_000_000},
		{"4096B/s", 4096},
		{"4096/s", 4096},
		{"4096", 4096},
		{" 1_000 ", 1000},
		{"1.5KiB/s", 1536},
	} {
		got, err := ParseRate(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", `want a size per second, such as "256KiB/s" or "1MB/s", or a plain number of bytes per second`},
		{"256KiB", `rate "256KiB": want a size per second`},
		{"fast", `rate "fast": want a size per second`},
		{"16M/s", `unknown unit "M"`},
		{"/s", `want a number of bytes`},
		{"-1/s", `want a number of bytes`},
	} {
		if _, err := ParseRate(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRate(%q) error = %v; want it to contain %q", tc.in, err, tc.want)
		}
	}
	for _, r := range []Rate{0, 1000, 256 << 10, 3 << 30} {
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", r.String(), back, err, uint64(r))
		}
	}
	if got := Rate(256 << 10).String(); got != "256KiB/s" {
		t.Errorf("String = %q", got)
	}
}

// TestExamples loads every skill in examples/: each validates, its program
// exists and may run, and a script's interpreter is granted execute.
func TestExamples(t *testing.T) {
	paths, err := filepath.Glob("examples/*/skill.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 4 {
		t.Fatalf("found %d examples, want at least 4", len(paths))
	}
	for _, path := range paths {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			s, err := LoadSkill(path)
			if err != nil {
				t.Fatalf("LoadSkill: %v", err)
			}
			if s.Skill.Name != filepath.Base(s.Dir) {
				t.Errorf("skill %q is in folder %q; name them alike", s.Skill.Name, filepath.Base(s.Dir))
			}
			if s.Skill.Description == "" {
				t.Errorf("no description: the agent would not know when to use it")
			}
			prog := s.ExpandPath(s.Skill.Command[0], nil)
			fi, err := os.Stat(prog)
			if err != nil {
				t.Fatalf("command[0]: %v", err)
			}
			if fi.Mode()&0o111 == 0 {
				t.Errorf("command[0] %s is not executable", prog)
			}
			exec := make([]string, len(s.FS.Exec))
			for i, e := range s.FS.Exec {
				exec[i] = s.ExpandPath(e, nil)
			}
			if interp := shebang(t, prog); interp != "" {
				if real, err := filepath.EvalSymlinks(interp); err == nil {
					interp = real
				}
				if !granted(interp, exec) {
					t.Errorf("%s runs under %s, which fs.exec does not grant", prog, interp)
				}
			}
			for _, e := range exec {
				if _, err := os.Stat(e); err != nil {
					t.Errorf("fs.exec: %v", err)
				}
			}
			if _, err := s.Argv(exampleArgs(s), nil); err != nil {
				t.Errorf("Argv with every required param: %v", err)
			}
		})
	}
}

// shebang is the interpreter a script names on its first line, or "".
func shebang(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	interp, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	return interp
}

func exampleArgs(s *Skill) map[string]string {
	args := map[string]string{}
	for name, p := range s.Params {
		if p.Required {
			args[name] = "x"
			if p.Type == ParamInteger || p.Type == ParamNumber {
				args[name] = "1"
			}
		}
	}
	return args
}

// TestExamplesRun runs each example's command line, as ParamsFromArgs and
// Argv make it from the ARGS of kairo run, without the sandbox (the sandbox
// package tests confinement), in a workspace of its own.
func TestExamplesRun(t *testing.T) {
	work, tmp := t.TempDir(), t.TempDir()
	for name, text := range map[string]string{
		"notes.txt": "hello world\nTODO: fix\nthird line\n",
		"src/a.c":   "x FIXME\n",
	} {
		path := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		example string
		args    []string
		want    string // regexp the output must match
	}{
		{"checksum", []string{"file=notes.txt", "src/a.c"}, `^[0-9a-f]{64}  notes.txt\n[0-9a-f]{64}  src/a.c\n$`},
		{"wordcount", []string{"file=notes.txt"}, `^\s*3\s+6\s+33 notes.txt\n$`},
		{"wordcount", []string{"count=words", "file=notes.txt"}, `^6 notes.txt\n$`},
		{"search", []string{"pattern=TODO|FIXME"}, `(?s)^(\./notes.txt:2:TODO: fix\n\./src/a.c:1:x FIXME\n|\./src/a.c:1:x FIXME\n\./notes.txt:2:TODO: fix\n)$`},
		{"search", []string{"pattern=o", "path=notes.txt", "max_per_file=1"}, `^1:hello world\n$`},
		{"archive", []string{"path=src", "name=backup"}, `^out/backup.tar.gz\n$`},
		{"progress-demo", []string{"steps=4", "delay=0"}, `^progress=25%\nprogress=50%\nprogress=75%\nprogress=100%\ndone in 4 steps\n$`},
	} {
		t.Run(tc.example, func(t *testing.T) {
			s, err := LoadSkill(filepath.Join("examples", tc.example, "skill.toml"))
			if err != nil {
				t.Fatal(err)
			}
			argv, err := s.Argv(s.ParamsFromArgs(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = work
			cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "LANG=C"}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%q: %v\n%s", argv, err, stderr.Bytes())
			}
			if !regexp.MustCompile(tc.want).Match(out) {
				t.Errorf("%q printed\n%s\nwant it to match %s", argv, out, tc.want)
			}
			// Each progress line, and no other, is a progress report.
			var percents []string
			for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
				for _, r := range s.Progress {
					if m := r.Regexp().FindStringSubmatch(line); m != nil {
						percents = append(percents, m[r.Regexp().SubexpIndex("percent")])
					}
				}
			}
			if tc.example == "progress-demo" && !slices.Equal(percents, []string{"25", "50", "75", "100"}) {
				t.Errorf("progress reports %q, want 25, 50, 75, 100", percents)
			}
		})
	}
	gz, err := os.ReadFile(filepath.Join(work, "out", "backup.tar.gz"))
	if err != nil || !bytes.HasPrefix(gz, []byte{0x1f, 0x8b}) {
		t.Errorf("archive wrote no gzip file: %v", err)
	}
}

// TestParseSkillHosts: [net] hosts is read as written; the proxy, not the
// manifest, normalizes names.
func TestParseSkillHosts(t *testing.T) {
	s, err := ParseSkill("/skills/t/skill.toml", []byte(skillHead+"[net]\nhosts = [\"api.github.com:443\", \"*.pythonhosted.org\", \"[::1]:8080\", \"10.0.0.7\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"api.github.com:443", "*.pythonhosted.org", "[::1]:8080", "10.0.0.7"}; !slices.Equal(s.Net.Hosts, want) {
		t.Errorf("[net] hosts = %q, want %q", s.Net.Hosts, want)
	}
}
