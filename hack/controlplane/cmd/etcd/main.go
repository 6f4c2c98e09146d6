// Command etcd is etcd's own server entry point, built from the module proxy
// so that the control plane used by Tickwork's tests needs no download site.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
