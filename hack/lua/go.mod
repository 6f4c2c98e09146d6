// Wrapper module that builds glua, gopher-lua's interpreter: the Lua VM Argo CD
// runs resource health checks in, so the tests run Tickwork's health check the
// way Argo CD does; see hack/README.md.
module tickwork.dev/hack/lua

go 1.26.0

tool github.com/yuin/gopher-lua/cmd/glua

require (
	github.com/chzyer/readline v0.0.0-20180603132655-2972be24d48e // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
	golang.org/x/sys v0.0.0-20190204203706-41f3e6584952 // indirect
)
