package nettlpside
import ("testing";"os/exec")
func ssDump(t *testing.T){ out,_:=exec.Command("ss","-uanp").CombinedOutput(); t.Log(string(out)) }
