// Command etcd runs etcd's own entry point from go.etcd.io/etcd/server/v3; the root etcd module
// carries local replace lines and cannot be built as a dependency, so this is its two-line main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
