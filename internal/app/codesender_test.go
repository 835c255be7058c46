package app

import (
	"bufio"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestParseConfigLoginCodeSender(t *testing.T) {
	prod := map[string]string{"SURGE_MYSQL_DSN": "u:p@tcp(h:3306)/d", "SURGE_REDIS_ADDRS": "a:1"}
	with := func(v string) map[string]string {
		m := map[string]string{"SURGE_LOGIN_CODE_SENDER": v}
		for k, x := range prod {
			m[k] = x
		}
		return m
	}
	for v, want := range map[string]CodeSenderSetting{
		"":                                  {Kind: SenderNone},
		"none":                              {Kind: SenderNone},
		" log ":                             {Kind: SenderLog},
		"webhook:http://sms:8000/send":      {Kind: SenderWebhook, URL: "http://sms:8000/send"},
		"webhook:https://u:p@h.example/x?k": {Kind: SenderWebhook, URL: "https://u:p@h.example/x?k"},
	} {
		c, err := ParseConfig(nil, envOf(with(v)))
		if err != nil || c.LoginCodeSender != want {
			t.Errorf("SURGE_LOGIN_CODE_SENDER=%q: %+v, %v; want %+v", v, c.LoginCodeSender, err, want)
		}
		logWarned := false
		for _, w := range c.Warnings {
			logWarned = logWarned || strings.Contains(w, "SURGE_LOGIN_CODE_SENDER=log")
		}
		if logWarned != (want.Kind == SenderLog) {
			t.Errorf("SURGE_LOGIN_CODE_SENDER=%q: warnings %q", v, c.Warnings)
		}
	}
	// Dev mode writes codes to the log anyway: no warning there.
	if c, err := ParseConfig(nil, envOf(map[string]string{"SURGE_LOGIN_CODE_SENDER": "log"})); err != nil || len(c.Warnings) != 0 {
		t.Errorf("dev mode with the log sender: %v, warnings %q", err, c.Warnings)
	}
	if c, err := ParseConfig([]string{"-login-code-sender", "log"}, envOf(prod)); err != nil || c.LoginCodeSender.Kind != SenderLog {
		t.Errorf("-login-code-sender log: %+v, %v", c.LoginCodeSender, err)
	}
	for _, v := range []string{"sms", "LOG", "webhook:", "webhook:ftp://h/x", "webhook:/relative", "webhook:http://", "webhook:http://u:secret@%zz"} {
		_, err := ParseConfig(nil, envOf(with(v)))
		if err == nil || !strings.Contains(err.Error(), "SURGE_LOGIN_CODE_SENDER") {
			t.Errorf("SURGE_LOGIN_CODE_SENDER=%q: %v, want an error naming the variable", v, err)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("SURGE_LOGIN_CODE_SENDER=%q: the error shows the password: %v", v, err)
		}
	}
}

// settings are the configuration's environment variables, from its flags (-x-y is SURGE_X_Y).
func settings(t *testing.T) []string {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	ConfigFlags(fs, envOf(nil))
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		v := "SURGE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if !strings.Contains(f.Usage, v) {
			t.Errorf("flag -%s does not name its variable %s in its help", f.Name, v)
		}
		out = append(out, v)
	})
	return out
}

// composeAppEnv reads the environment of the app service of docker-compose.yml (no Docker
// engine runs here: the file is read, not run).
func composeAppEnv(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	entry := regexp.MustCompile(`^ {6}([A-Z0-9_]+): *"?([^"#]*?)"? *(#.*)?$`)
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":"):
			section = strings.TrimSpace(line) // a service
		case line == "    environment:" && section == "app:":
			section = "app:environment"
		case section == "app:environment" && strings.HasPrefix(line, "      "):
			if m := entry.FindStringSubmatch(line); m != nil {
				env[m[1]] = m[2]
			} else if strings.TrimSpace(line)[0] != '#' {
				t.Fatalf("docker-compose.yml: cannot read the app's environment line %q", line)
			}
		case section == "app:environment" && strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     "):
			section = "app:"
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(env) == 0 {
		t.Fatal("docker-compose.yml: no environment found for the app service")
	}
	return env
}

// The compose stack's server can be logged into: it runs in production mode, which never
// returns codes, and writes them to its log. Every variable it sets is a setting of the
// server (a misspelt one would be ignored without a word), and the whole configures a server.
func TestComposeStackConfiguration(t *testing.T) {
	env := composeAppEnv(t)
	known := map[string]bool{}
	for _, v := range settings(t) {
		known[v] = true
	}
	for k := range env {
		if !known[k] {
			t.Errorf("docker-compose.yml sets %s, which is no setting of the server", k)
		}
	}
	c, err := ParseConfig(nil, envOf(env))
	if err != nil {
		t.Fatalf("docker-compose.yml's settings: %v", err)
	}
	if c.Dev() || c.LoginCodeSender.Kind != SenderLog || len(c.AdminPhones) == 0 || !c.Seed {
		t.Errorf("the compose stack: mode %s, code sender %+v, admins %v, seed %v; want production, log, an admin and demo data",
			c.Mode, c.LoginCodeSender, c.AdminPhones, c.Seed)
	}
}
