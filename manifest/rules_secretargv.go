package manifest

import "fmt"

// secretInArgvRule warns about a ${secrets.X} in an argv entry (rule secret-in-argv): a process's
// command line is world-readable (/proc/PID/cmdline, ps -eo args) for as long as it runs, unless
// /proc is mounted with hidepid, so every local user reads the secret.
func secretInArgvRule(c *collector, ptr string, tok TemplateToken) {
	for _, e := range tok.Exprs() {
		if e.Source != "secrets" {
			continue
		}
		c.at(ptr, SeverityWarning, "secret-in-argv",
			fmt.Sprintf("${secrets.%s} is on the command line, where every local user reads it (ps -eo args, /proc/PID/cmdline) while the CLI runs", e.Name()),
			fmt.Sprintf("give the secret through the environment (the CLI's setup persist: {env: NAME}, or a step's env: {NAME: \"${secrets.%s}\"}) or on standard input (runner.stdin: \"${secrets.%s}\")", e.Name(), e.Name()))
	}
}
