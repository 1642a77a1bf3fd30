package manifests

import (
	"errors"
	"regexp"
	"slices"
	"testing"
)

// [plugins.NAME.grants] and the [plugin_limits] ceilings and public subjects load
// from kairo.toml; a ceiling below the default it caps, a bad grant or a
// bad public pattern is an error naming the key.
func TestOperatorGrantsAndCeilings(t *testing.T) {
	c, err := Load(writeConfig(t, `
[plugin_limits]
max_memory = "1GiB"
max_deadline = "30s"
public = ["app.news.>"]

[plugins.echo]
grants.call = ["process.spawn"]
grants.publish = ["app.>"]

[plugins.timer.grants]
subscribe = ["kairo.system.>"]
wasi_env = ["TZ"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.PluginLimits.MaxMemory != GiB || c.PluginLimits.MaxDeadlineDuration().String() != "30s" || !slices.Equal(c.PluginLimits.Public, []string{"app.news.>"}) {
		t.Errorf("[plugin_limits] = %+v", c.PluginLimits)
	}
	if g := c.Plugins["echo"].Grants; !slices.Equal(g.Call, []string{"process.spawn"}) || !slices.Equal(g.Publish, []string{"app.>"}) {
		t.Errorf("[plugins.echo] grants = %+v", g)
	}
	if g := c.Plugins["timer"].Grants; !slices.Equal(g.Subscribe, []string{"kairo.system.>"}) || !slices.Equal(g.WASIEnv, []string{"TZ"}) {
		t.Errorf("[plugins.timer.grants] = %+v", g)
	}

	for _, tc := range []struct{ name, text, key, want string }{
		{"ceiling below the default", "[plugin_limits]\nmemory = \"128MiB\"\nmax_memory = \"64MiB\"\n", "plugin_limits.max_memory", `64MiB is below plugin_limits.memory \(128MiB\)`},
		{"deadline ceiling below the default", "[plugin_limits]\nmax_deadline = \"500ms\"\n", "plugin_limits.max_deadline", `500ms is below plugin_limits.deadline \(1s\)`},
		{"no ceiling", "[plugin_limits]\nmax_deadline = \"\"\n", "plugin_limits.max_deadline", `is missing`},
		{"bad public", "[plugin_limits]\npublic = [\"a..b\"]\n", "plugin_limits.public", `a\.\.b`},
		{"bad granted pattern", "[plugins.echo.grants]\npublish = [\"a.>.b\"]\n", "plugins.echo.grants.publish", `a\.>\.b`},
		{"bad granted folder", "[plugins.echo.grants]\nwasi_fs = [\"rel\"]\n", "plugins.echo.grants.wasi_fs", `"rel" is not an absolute path`},
		{"unknown grant key", "[plugins.echo.grants]\nspawn = true\n", "plugins.echo.grants.spawn", `unknown key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.text))
			var e *Error
			if !errors.As(err, &e) || e.Key != tc.key || !regexp.MustCompile(tc.want).MatchString(e.Msg) {
				t.Fatalf("Load: %v; want key %s matching %q", err, tc.key, tc.want)
			}
		})
	}
}
