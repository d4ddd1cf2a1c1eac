# cli: the `fence` command-line tool, linked statically with libfence.
CLI_SRC := $(wildcard cli/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/%.o)

BINS += $(B)/fence

$(B)/fence: $(CLI_OBJ) $(B)/libfence.a
	$(CC) -o $@ $^ $(REAL_LDFLAGS) $(HIREDIS_LIBS)
