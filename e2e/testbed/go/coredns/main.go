// Command coredns is CoreDNS (github.com/coredns/coredns) with only the plugins the test bed's
// cluster DNS uses, in CoreDNS's own plugin order: the full build drags in every cloud SDK.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

func init() {
	dnsserver.Directives = []string{"bind", "health", "errors", "cache", "kubernetes"}
}

func main() { coremain.Run() }
