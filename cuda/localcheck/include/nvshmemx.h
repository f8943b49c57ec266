/* Local compile check only: see ../nvshmem_decls.h. */
#include "../nvshmem_decls.h"
