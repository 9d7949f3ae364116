// Command etcd is etcd's own server entry point (go.etcd.io/etcd/server/v3/etcdmain), built
// at the version Kubernetes pins, so the test bed needs no prebuilt etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
