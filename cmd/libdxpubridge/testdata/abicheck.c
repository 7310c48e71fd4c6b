/*
 * abicheck.c: compiled (never run) by the Go test to prove that the public
 * header's prototypes are the functions the library exports. cgo's
 * generated header declares them without const; with const defined away,
 * any other difference in a return or parameter type is a conflicting
 * declaration, an error. (That every export has a prototype in the header
 * at all is checked by the Go test, from the sources.)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#define const
#include "dxpu_bridge.h"
#include "libdxpubridge.h"

int main(void)
{
	/* Take every exported function's address through the public names. */
	typedef void (*fn)(void);
	fn fns[] = {
	    (fn)dxpu_abi_version, (fn)dxpu_strerror, (fn)dxpu_bridge_new,
	    (fn)dxpu_bridge_free, (fn)dxpu_bridge_handle_frame, (fn)dxpu_bridge_next_frame,
	    (fn)dxpu_bridge_send_tlp, (fn)dxpu_bridge_next_tlp, (fn)dxpu_bridge_release,
	    (fn)dxpu_bridge_next_event, (fn)dxpu_bridge_deadline, (fn)dxpu_bridge_on_timer,
	    (fn)dxpu_bridge_reset, (fn)dxpu_bridge_state, (fn)dxpu_bridge_counters,
	    (fn)dxpu_bridge_last_error, (fn)dxpu_tlp_credits,
	    (fn)dxpu_bridge_new_keyed, (fn)dxpu_bridge_install_key, (fn)dxpu_bridge_activate_key,
	    (fn)dxpu_bridge_rekey, (fn)dxpu_bridge_key_state,
	};
	return fns[0] == NULL;
}
