package config

import (
	"cmp"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseNamesTheBadKey(t *testing.T) {
	// key is the *Error's Key; text, when set, is what the error prints:
	// the whole path followed by ":", so that a path missing its parents
	// ("modle: ") does not pass.
	tests := []struct {
		name, json, key, text string
	}{
		{"unknown top key", `{"agentz": {}}`, "agentz", "config: agentz:"},
		{"unknown nested key", `{"agents": {"defaults": {"modle": "x"}}}`, "agents.defaults.modle", "config: agents.defaults.modle:"},
		{"unknown provider key", `{"providers": {"openai": {"apikey2": "x"}}}`, "providers.openai.apikey2", "config: providers.openai.apikey2:"},
		{"wrong type", `{"agents": {"defaults": {"maxTokens": "lots"}}}`, "agents.defaults.maxTokens", "config: agents.defaults.maxTokens: must be a whole number, got a string"},
		{"wrong type in a map's value", `{"providers": {"openai": {"extraHeaders": {"A": 1}}}}`, "providers.openai.extraHeaders.A", "config: providers.openai.extraHeaders.A: must be a string, got a number"},
		{"out of range", `{"agents": {"defaults": {"maxToolIterations": 0}}}`, "agents.defaults.maxToolIterations", ""},
		{"bad prefix", `{"nats": {"prefix": "a.b"}}`, "nats.prefix", ""},
		{"zero duplicate window", `{"nats": {"duplicateWindowSeconds": -5}}`, "nats.duplicateWindowSeconds", ""},
		{"duplicate window within a publish's resends", `{"nats": {"duplicateWindowSeconds": 30}}`, "nats.duplicateWindowSeconds", ""},
		{"replay window within a publish's resends", `{"nats": {"leaseTtlSeconds": 5, "replayWindowSeconds": 30}}`, "nats.replayWindowSeconds", ""},
		{"replay window under two lease TTLs", `{"nats": {"leaseTtlSeconds": 90, "replayWindowSeconds": 120}}`, "nats.replayWindowSeconds", ""},
		// 18446744075 s in nanoseconds wraps around int64 to 1.29 s.
		{"lease TTL past a duration's range", `{"nats": {"leaseTtlSeconds": 18446744075}}`, "nats.leaseTtlSeconds", "config: nats.leaseTtlSeconds: must be 1..3600, got 1.8446744075e+10"},
		{"lease TTL over an hour", `{"nats": {"leaseTtlSeconds": 3601, "replayWindowSeconds": 7202}}`, "nats.leaseTtlSeconds", ""},
		{"object store bound under the largest object", `{"nats": {"blobsMaxMB": 10}}`, "nats.blobsMaxMB", ""},
		{"listen address with no port", `{"observability": {"listen": "::::"}}`, "observability.listen", `config: observability.listen: want host:port ("127.0.0.1:9090", ":9090"), got "::::"`},
		{"listen port not a number", `{"observability": {"listen": "127.0.0.1:metrics"}}`, "observability.listen", ""},
		{"provider bound below -1", `{"providers": {"ollama": {"maxConcurrent": -2}}}`, "providers.ollama.maxConcurrent", ""},
		{"unset variable", `{"providers": {"openai": {"apiKey": "${NO_SUCH_VAR}"}}}`, "providers.openai.apiKey", ""},
		{"not json", `{"agents": `, "", "invalid config: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Parse(Defaults(), []byte(tt.json), env(nil))
			var ce *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want a *config.Error", err)
			}
			text := cmp.Or(tt.text, "config: "+tt.key+": ")
			if ce.Key != tt.key || !strings.Contains(err.Error(), text) {
				t.Errorf("error %q names %q, want %q and to contain %q", err, ce.Key, tt.key, text)
			}
		})
	}
}

// TestParseSyntaxErrorPosition: a file that is not JSON is refused naming
// the line and column where it stops being JSON (a trailing comma said
// only "invalid character '}' looking for beginning of object key
// string").
func TestParseSyntaxErrorPosition(t *testing.T) {
	tests := []struct{ name, json, want string }{
		{"trailing comma", "{\n  \"agents\": {\"defaults\": {\"model\": \"x\",}}\n}\n",
			"invalid config: line 2, column 40: invalid character '}' looking for beginning of object key string"},
		{"after a multi-byte character", `{"agents": {"defaults": {"model": "é" "x"}}}`,
			"invalid config: line 1, column 39: invalid character '\"' after object key:value pair"},
		{"cut short", "{\"agents\": ", "invalid config: line 1, column 11: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Parse(Defaults(), []byte(tt.json), env(nil))
			if !errors.Is(err, ErrInvalid) || err.Error() != tt.want {
				t.Errorf("Parse = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestKeysAreCaseSensitive: a key that differs from one nanofleet takes
// only in case is refused naming its path and the key to write, in the
// shared sections and in every section decoded by its owner;
// encoding/json took it ("MODEL" set the model).
func TestKeysAreCaseSensitive(t *testing.T) {
	type worker struct {
		HistoryCacheMB int `json:"historyCacheMB"`
		Turns          int `json:"turnsPerWorker"`
	}
	tests := []struct {
		name, json string
		want       []string // "key: reason", one line each
	}{
		{"shared section", `{"agents": {"defaults": {"MODEL": "shouty-model"}}}`,
			[]string{"agents.defaults.MODEL: unknown key; keys are case-sensitive: did you mean model?"}},
		{"top level", `{"Nats": {"port": 4222}}`,
			[]string{"Nats: unknown key; keys are case-sensitive: did you mean nats?"}},
		{"in a map's value", `{"providers": {"openai": {"APIKey": "k"}}}`,
			[]string{"providers.openai.APIKey: unknown key; keys are case-sensitive: did you mean apiKey?"}},
		{"snake_case not in lower case", `{"agents": {"defaults": {"Max_Tokens": 5}}}`,
			[]string{"agents.defaults.Max_Tokens: unknown key (check spelling; keys are camelCase)"}},
		{"owner's section, with a mistyped value", `{"worker": {"historyCacheMb": 3, "TURNSPERWORKER": 5, "turnsPerWorker": "many"}}`,
			[]string{
				"worker.TURNSPERWORKER: unknown key; keys are case-sensitive: did you mean turnsPerWorker?",
				"worker.historyCacheMb: unknown key; keys are case-sensitive: did you mean historyCacheMB?",
				"worker.turnsPerWorker: must be a whole number, got a string",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Defaults()
			err := Parse(f, []byte(tt.json), env(nil))
			if err == nil {
				var w worker
				err = f.Section("worker", &w)
				if w != (worker{}) {
					t.Errorf("decoded %+v from keys it refused", w)
				}
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, "invalid config: "+w)
			}
			if !errors.Is(err, ErrInvalid) || err.Error() != strings.Join(want, "\n") {
				t.Fatalf("error = %v, want\n%s", err, strings.Join(want, "\n"))
			}
			if f.Agents.Defaults.Model != "gpt-4o-mini" {
				t.Errorf("model = %q: a refused key was decoded", f.Agents.Defaults.Model)
			}
		})
	}
}

func TestParseExpandsPlaceholders(t *testing.T) {
	f := Defaults()
	data := `{"providers": {"openai": {"apiKey": "${KEY}", "apiBase": "${BASE:-http://localhost:1234/v1}"}},
	          "agents": {"defaults": {"model": "deepseek-chat", "temperature": 0.3}}}`
	if err := Parse(f, []byte(data), env(map[string]string{"KEY": "sk-test"})); err != nil {
		t.Fatal(err)
	}
	p := f.Providers["openai"]
	if p.APIKey != "sk-test" || p.APIBase != "http://localhost:1234/v1" {
		t.Errorf("provider = %+v", p)
	}
	if f.Agents.Defaults.Model != "deepseek-chat" || f.Agents.Defaults.MaxTokens != 8192 {
		t.Errorf("defaults not merged: %+v", f.Agents.Defaults)
	}
}

func TestSectionIsStrictAndPathed(t *testing.T) {
	f := Defaults()
	if err := Parse(f, []byte(`{"tools": {"exec": {"timeout": "soon"}}}`), env(nil)); err != nil {
		t.Fatal(err)
	}
	var tools struct {
		Exec struct {
			Timeout int `json:"timeout"`
		} `json:"exec"`
	}
	err := f.Section("tools", &tools)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "config: tools.exec.timeout: must be a whole number, got a string") {
		t.Fatalf("Section error = %v, want one naming tools.exec.timeout and the kinds in JSON terms", err)
	}
	if strings.Contains(err.Error(), "struct") || strings.Contains(err.Error(), "int") {
		t.Errorf("Section error shows Go types: %v", err)
	}
	f = Defaults()
	if err := Parse(f, []byte(`{"tools": {"exec": {"timeot": 5}}}`), env(nil)); err != nil {
		t.Fatal(err)
	}
	err = f.Section("tools", &tools)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "config: tools.exec.timeot: unknown key") {
		t.Fatalf("Section error = %v, want one naming tools.exec.timeot", err)
	}
	var none struct{}
	if err := f.Section("gateway", &none); err != nil {
		t.Errorf("missing section: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	_, err := Load(path, env(nil), false)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("required missing file: %v", err)
	}
	// The file named once, as the user gave it.
	if want := "config file " + path + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("required missing file: %v, want %q", err, want)
	}
	f, err := Load(path, env(nil), true)
	if err != nil || f.Agents.Defaults.MaxToolIterations != 40 {
		t.Errorf("optional missing file: %v, %+v", err, f)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `{"nats":{"port":-1}}`, `{"agents":{"defaults":{"model":"${M:-x}"}}}`, `[]`, `{"tools":{"a":[1,"${X}"]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cfg := Defaults()
		if err := Parse(cfg, []byte(data), env(map[string]string{"X": "1"})); err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted a config Validate rejects: %v", err)
		}
	})
}

// TestLoadAppliesModelFromEnv: NANOFLEET_MODEL overrides the file's model
// and the defaults' when there is no file.
func TestLoadAppliesModelFromEnv(t *testing.T) {
	withFile := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(withFile, []byte(`{"agents":{"defaults":{"model":"from-file"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, envModel, want string
	}{
		{"file only", withFile, "", "from-file"},
		{"env over file", withFile, "from-env", "from-env"},
		{"env, no file", filepath.Join(t.TempDir(), "missing.json"), "from-env", "from-env"},
		{"no file, no env", filepath.Join(t.TempDir(), "missing.json"), "", "gpt-4o-mini"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(tt.path, env(map[string]string{"NANOFLEET_MODEL": tt.envModel}), true)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Agents.Defaults.Model; got != tt.want {
				t.Fatalf("model = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLoadAppliesNATSURLFromEnv: NANOFLEET_NATS_URL, which the service
// binaries read, overrides the file's nats.url for every command (the CLI
// ignored it and ran a fleet of its own beside the one it names).
func TestLoadAppliesNATSURLFromEnv(t *testing.T) {
	withFile := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(withFile, []byte(`{"nats":{"url":"nats://from-file:4222"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, envURL, want string
	}{
		{"file only", withFile, "", "nats://from-file:4222"},
		{"env over file", withFile, "nats://a:4222,nats://b:4222", "nats://a:4222,nats://b:4222"},
		{"env, no file", filepath.Join(t.TempDir(), "missing.json"), "nats://a:4222", "nats://a:4222"},
		{"no file, no env: embedded", filepath.Join(t.TempDir(), "missing.json"), "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Load(tt.path, env(map[string]string{"NANOFLEET_NATS_URL": tt.envURL}), true)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.NATS.URL; got != tt.want {
				t.Fatalf("nats.url = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEditableProfile(t *testing.T) {
	tests := []struct {
		name, tools string
		want        bool
	}{
		{"no tools section", ``, false},
		{"default", `{"workspace": {"root": "/w"}}`, false},
		{"opted in", `{"workspace": {"editableProfile": true}}`, true},
		{"mistyped is not an opt-in", `{"workspace": {"editableProfile": "yes"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Defaults()
			f.Tools = []byte(tt.tools)
			if got := f.EditableProfile(); got != tt.want {
				t.Errorf("EditableProfile() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSectionKeyPaths checks the paths encoding/json gets wrong: an unknown
// key below the top (it names only the last element) and a mistyped key
// of an embedded struct (it names the struct's Go type).
func TestSectionKeyPaths(t *testing.T) {
	type Inner struct {
		Slots int     `json:"slots"`
		Wait  Seconds `json:"waitSeconds"`
		Code  int     `json:"-"`
	}
	type section struct {
		Inner
		Servers map[string]struct {
			URL  string   `json:"url"`
			Args []string `json:"args"`
		} `json:"servers"`
		Retries int `json:"retries"`
	}
	tests := []struct {
		name, json, wantKey string
	}{
		{"embedded, wrong type", `{"slots": "many"}`, "worker.slots"},
		{"seconds, wrong type", `{"waitSeconds": "1m"}`, "worker.waitSeconds"},
		{"code-only field", `{"Code": 1}`, "worker.Code"},
		{"unknown in a map value", `{"servers": {"a": {"url": "x", "ulr": "y"}}}`, "worker.servers.a.ulr"},
		{"map value, wrong type", `{"servers": {"a": {"args": "x"}}}`, "worker.servers.a.args"},
		{"unknown at the top", `{"retries": 1, "retry": 2}`, "worker.retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &File{Worker: []byte(tt.json)}
			var v section
			err := f.Section("worker", &v)
			var ce *Error
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) || ce.Key != tt.wantKey {
				t.Errorf("Section = %v, want an error naming %s", err, tt.wantKey)
			}
		})
	}
	f := &File{Worker: []byte(`{"slots": 3, "waitSeconds": 90, "retries": 2}`)}
	var v section
	if err := f.Section("worker", &v); err != nil || v.Slots != 3 || v.Wait != Seconds(90*time.Second) || v.Retries != 2 {
		t.Errorf("Section = %v, decoded %+v", err, v)
	}
}
