package host

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kairo-os/kairo/abi"
	"github.com/kairo-os/kairo/internal/mcp"
	"github.com/kairo-os/kairo/internal/tools"
	"github.com/kairo-os/kairo/manifests"
)

// abi.SubjectMCPConnected and abi.SubjectMCPFailed report the daemon's MCP
// servers, with an [abi.MCPServerState].

// mcpServers are the daemon's MCP servers. Each connects on a goroutine of
// its own, so a slow or broken server delays nothing; once connected, its
// tools are the registry's. stop closes them all — before the kernel, so
// each gets stdin closed and SIGTERM before SIGKILL.
type mcpServers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	servers []*mcp.Server
}

// startMCP connects the servers of kairo.toml's [mcp.NAME] tables.
func (d *Daemon) startMCP(cfg manifests.Config) {
	s := &mcpServers{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	d.mcp = s
	for _, name := range slices.Sorted(maps.Keys(cfg.MCP)) {
		sc := mcpConfig(name, cfg.MCP[name])
		s.wg.Add(1)
		go func() { // owned by s: stop cancels and waits
			defer s.wg.Done()
			srv, err := mcp.Connect(s.ctx, d.kernel, sc, d.log)
			if err == nil {
				s.mu.Lock()
				s.servers = append(s.servers, srv)
				s.mu.Unlock()
				err = d.tools.AddSource(name, srv, mcpOrigin(sc), mcpGrants(sc))
			}
			if err != nil {
				if s.ctx.Err() == nil {
					d.log.Error("an MCP server cannot serve the agent", "server", name, "err", err)
					d.publishSystem(abi.SubjectMCPFailed, abi.MCPServerState{Server: name, Error: err.Error()})
				}
				return
			}
			var names []string
			for _, t := range srv.Tools() {
				names = append(names, t.Name)
			}
			d.log.Info("MCP server connected", "server", name, "tools", len(names))
			d.publishSystem(abi.SubjectMCPConnected, abi.MCPServerState{Server: name, Tools: names})
		}()
	}
}

// stop closes every server, each within its shutdown grace.
func (s *mcpServers) stop() {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	servers := s.servers
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Add(1)
		go func() { // joined below
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv.Close(ctx)
		}()
	}
	wg.Wait()
}

// mcpConfig is the server config of a [mcp.NAME] table, which Load has
// validated.
func mcpConfig(name string, m manifests.MCPServer) mcp.ServerConfig {
	sc := mcp.ServerConfig{Name: name, Command: m.Command, URL: m.URL, Env: m.Env, EnvPass: m.EnvPass, Cwd: m.Cwd,
		MaxTools: m.MaxTools, MaxResultBytes: int64(m.MaxResultBytes), Secrets: m.Secrets}
	sc.ConnectTimeout, _ = time.ParseDuration(m.ConnectTimeout)
	sc.ShutdownGrace, _ = time.ParseDuration(m.ShutdownGrace)
	if b := m.Sandbox; b != nil {
		sc.Sandbox = &mcp.Sandbox{Manifest: b.Manifest, FS: b.FS, Net: b.Net, Env: b.Env, Limits: b.Limits}
	}
	return sc
}

func mcpOrigin(sc mcp.ServerConfig) string {
	switch {
	case sc.URL != "":
		return "MCP over HTTP: " + sc.URL
	case sc.Sandbox != nil && sc.Sandbox.Manifest != "":
		return fmt.Sprintf("MCP over stdio: %s %s", sc.Sandbox.Manifest, strings.Join(sc.Command, " "))
	}
	return "MCP over stdio: " + strings.Join(sc.Command, " ")
}

// mcpGrants are what a stdio server's sandbox lets it reach.
func mcpGrants(sc mcp.ServerConfig) []string {
	b := sc.Sandbox
	switch {
	case sc.URL != "":
		return nil
	case b == nil:
		return []string{"the sandbox's default profile"}
	case b.Manifest != "":
		sk, err := manifests.LoadSkill(b.Manifest)
		if err != nil {
			return []string{"manifest " + b.Manifest}
		}
		return tools.SkillGrants(sk)
	}
	return tools.SkillGrants(&manifests.Skill{FS: b.FS, Net: b.Net, Env: b.Env, Limits: b.Limits})
}
