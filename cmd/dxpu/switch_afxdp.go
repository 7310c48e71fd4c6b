package main

import (
	"fmt"

	switching "github.com/dxpu/dxpu/fabric/switch"
)

func newAFXDPDataPath(ports map[string]switching.Port, udpPort uint16) (*fwdDataPath, error) {
	return nil, fmt.Errorf("switch: --mode afxdp is not built yet; use packet")
}
