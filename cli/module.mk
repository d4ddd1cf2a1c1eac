# cli: the `fence` command-line tool, linked statically with libfence.
CLI_SRC := $(sort $(wildcard cli/*.c))
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)

BINS += $(B)/fence

$(CLI_OBJ): MOD_CFLAGS += -Ilib/lease
$(B)/fence: $(CLI_OBJ) $(LIBFENCE)
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(LEASE_LIBS)
