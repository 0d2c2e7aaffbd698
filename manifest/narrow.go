package manifest

import "slices"

// EffectiveSandbox returns the bundle's sandbox narrowed by a tool's (AIP-29: tools inherit and may
// only narrow). Every list the tool declares replaces the bundle's (lint has checked it grants no
// more); deny lists are unioned; exec is allowed only when both allow it; env.set merges with the
// tool's values winning for the keys the bundle declares.
func EffectiveSandbox(bundle Sandbox, tool *Sandbox) Sandbox {
	out := cloneSandbox(bundle)
	if tool == nil {
		return out
	}
	if tool.Network != nil {
		if out.Network == nil {
			out.Network = &Network{}
		}
		if tool.Network.Egress != nil {
			out.Network.Egress = append([]string{}, tool.Network.Egress...)
		}
		if tool.Network.Ingress != nil {
			out.Network.Ingress = append([]string{}, tool.Network.Ingress...)
		}
	}
	if tool.FS != nil {
		if out.FS == nil {
			out.FS = &FS{}
		}
		if tool.FS.Read != nil {
			out.FS.Read = append([]string{}, tool.FS.Read...)
		}
		if tool.FS.Write != nil {
			out.FS.Write = append([]string{}, tool.FS.Write...)
		}
		for _, d := range tool.FS.Deny {
			if !slices.Contains(out.FS.Deny, d) {
				out.FS.Deny = append(out.FS.Deny, d)
			}
		}
	}
	if tool.Exec != nil {
		if out.Exec == nil {
			out.Exec = &Exec{}
		}
		allow := out.Exec.Allowed() && (tool.Exec.Allow == nil || *tool.Exec.Allow)
		out.Exec.Allow = &allow
		if tool.Exec.Spawn != nil {
			out.Exec.Spawn = append([]string{}, tool.Exec.Spawn...)
		}
		if !allow {
			out.Exec.Spawn = nil
		}
	}
	if tool.Env != nil {
		if out.Env == nil {
			out.Env = &Env{}
		}
		if tool.Env.Pass != nil {
			out.Env.Pass = append([]string{}, tool.Env.Pass...)
		}
		for k, v := range tool.Env.Set {
			if _, ok := out.Env.Set[k]; ok {
				out.Env.Set[k] = v
			}
		}
	}
	if tool.TTY != nil {
		out.TTY = &TTY{Required: tool.TTY.Required}
	}
	return out
}

func cloneSandbox(s Sandbox) Sandbox {
	var out Sandbox
	if s.Network != nil {
		out.Network = &Network{Egress: append([]string{}, s.Network.Egress...), Ingress: append([]string{}, s.Network.Ingress...)}
	}
	if s.FS != nil {
		out.FS = &FS{Read: append([]string{}, s.FS.Read...), Write: append([]string{}, s.FS.Write...), Deny: append([]string{}, s.FS.Deny...)}
	}
	if s.Exec != nil {
		allow := s.Exec.Allowed()
		out.Exec = &Exec{Allow: &allow, Spawn: append([]string{}, s.Exec.Spawn...)}
	}
	if s.Env != nil {
		out.Env = &Env{Pass: append([]string{}, s.Env.Pass...), Set: map[string]string{}}
		for k, v := range s.Env.Set {
			out.Env.Set[k] = v
		}
	}
	if s.TTY != nil {
		out.TTY = &TTY{Required: s.TTY.Required}
	}
	return out
}
