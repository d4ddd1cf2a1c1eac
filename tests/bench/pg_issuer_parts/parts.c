/* parts.c -- where the PostgreSQL issuer's acquire+release spends the
 * server's time: the cycle as fence.sql has it and as variants with one
 * part removed (variants.py makes them from sql/postgres/75-leases.sql in
 * schemas bx1..bx8), the same statements sent raw, and the floor (two
 * one-row UPDATE commits), rounds interleaved on one connection.  Per
 * part: median us per cycle, the median of each round's ratio to the
 * floor, and the backend's CPU (its /proc schedstat) per cycle and above
 * the floor's.  Run by run.sh; not part of make.
 *   parts CONNINFO ROUNDS CYCLES [NAME,NAME...]
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define H "0123456789abcdef0123456789abcdef"
typedef struct { const char *name, *a, *b; } var;
#define ACQ "SET (counter, token) = (SELECT n.v, n.v FROM (SELECT GREATEST(l.counter, COALESCE((SELECT m.token FROM fence.marks m WHERE m.resource = l.name), 0)) + 1 AS v) n), holder = '" H "', expires = clock_timestamp() + 30000 * interval '1 millisecond', info = NULL"
#define REL "SET holder = NULL, token = NULL, expires = NULL, info = NULL"
#define FN(s) {s, "SELECT token FROM " s ".lease_acquire('n-" s "', '" H "', 30000, NULL)", "SELECT " s ".lease_release('n-" s "', '" H "', $1)"}
static var V[] = {
  {"F", "UPDATE bench_floor SET v = v + 1 WHERE id = 1", "UPDATE bench_floor SET v = v + 1 WHERE id = 1"},
  FN("fence"), FN("bx1"), FN("bx2"), FN("bx3"), FN("bx4"), FN("bx5"), FN("bx6"), FN("bx7"), FN("bx8"),
  {"raw", "UPDATE fence.leases l " ACQ " WHERE l.name = 'n-raw' AND (l.holder IS NULL OR l.expires <= clock_timestamp()) RETURNING l.token",
          "UPDATE fence.leases l " REL " WHERE l.name = 'n-raw' AND l.holder = '" H "' AND l.token = $1 AND l.expires > clock_timestamp()"},
  {"rawn", "UPDATE fence.leases l " ACQ " WHERE l.name = 'n-rawn' AND (l.holder IS NULL OR l.expires <= clock_timestamp()) RETURNING l.token",
          "WITH u AS (UPDATE fence.leases l " REL " WHERE l.name = 'n-rawn' AND l.holder = '" H "' AND l.token = $1 AND l.expires > clock_timestamp() RETURNING l.name) SELECT pg_notify('fence_lease_released', u.name) FROM u"},
  {"rawm", "UPDATE fence.leases l SET counter = l.counter + 1, token = l.counter + 1, holder = '" H "', expires = clock_timestamp() + 30000 * interval '1 millisecond', info = NULL WHERE l.name = 'n-rawm' AND (l.holder IS NULL OR l.expires <= clock_timestamp()) RETURNING l.token",
          "UPDATE fence.leases l " REL " WHERE l.name = 'n-rawm' AND l.holder = '" H "' AND l.token = $1 AND l.expires > clock_timestamp()"},
  {"plain", "UPDATE bench_plain l " ACQ " WHERE l.name = 'n-plain' AND (l.holder IS NULL OR l.expires <= clock_timestamp()) RETURNING l.token",
          "UPDATE bench_plain l " REL " WHERE l.name = 'n-plain' AND l.holder = '" H "' AND l.token = $1 AND l.expires > clock_timestamp()"},
};
#define NV (int)(sizeof V / sizeof V[0])
static long long now_ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000LL+t.tv_nsec;}
static long long cpu_ns(int pid){char p[64];snprintf(p,sizeof p,"/proc/%d/schedstat",pid);FILE*f=fopen(p,"r");long long n=0;if(f){if(fscanf(f,"%lld",&n)!=1)n=0;fclose(f);}return n;}
static int cmpd(const void*a,const void*b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
static double med(double*v,int n){double t[256];memcpy(t,v,n*sizeof*v);qsort(t,n,sizeof*t,cmpd);return t[n/2];}
static void ok(PGresult*r,const char*q){if(PQresultStatus(r)!=PGRES_TUPLES_OK&&PQresultStatus(r)!=PGRES_COMMAND_OK){fprintf(stderr,"%s: %s",q,PQresultErrorMessage(r));exit(1);}}
int main(int argc,char**argv){
  int rounds=atoi(argv[2]),cycles=atoi(argv[3]);
  PGconn*c=PQconnectdb(argv[1]); if(PQstatus(c)!=CONNECTION_OK){fprintf(stderr,"%s",PQerrorMessage(c));return 1;}
  PGresult*r=PQexec(c,"SELECT pg_backend_pid()");int pid=atoi(PQgetvalue(r,0,0));PQclear(r);
  static double lat[32][256],cpu[32][256];
  const char*only=argc>4?argv[4]:NULL; if(only){fprintf(stderr,"pid %d\n",pid);fflush(stderr);}
  for(int k=0;k<rounds;k++) for(int v=0;v<NV;v++){ if(only&&v!=0&&!strstr(only,V[v].name))continue;
    long long t0=now_ns(),c0=cpu_ns(pid);
    for(int i=0;i<cycles;i++){
      r=PQexecParams(c,V[v].a,0,NULL,NULL,NULL,NULL,0);ok(r,V[v].a);
      char tok[32]="";int np=0;const char*pv[1]={tok};
      if(PQresultStatus(r)==PGRES_TUPLES_OK){if(PQntuples(r)!=1){fprintf(stderr,"%s: no row\n",V[v].name);exit(1);}snprintf(tok,sizeof tok,"%s",PQgetvalue(r,0,0));np=1;}
      PQclear(r);
      r=PQexecParams(c,V[v].b,np,NULL,pv,NULL,NULL,0);ok(r,V[v].b);PQclear(r);
    }
    lat[v][k]=(now_ns()-t0)/1e3/cycles; cpu[v][k]=(cpu_ns(pid)-c0)/1e3/cycles;
  }
  printf("%-6s %8s %6s %8s %8s %8s\n","part","us","xF","d_us","cpu_us","d_cpu");
  for(int v=0;v<NV;v++){double rt[256],dl[256],dc[256];for(int k=0;k<rounds;k++){rt[k]=lat[v][k]/lat[0][k];dl[k]=lat[v][k]-lat[0][k];dc[k]=cpu[v][k]-cpu[0][k];}
    printf("%-6s %8.0f %6.2f %8.0f %8.1f %8.1f\n",V[v].name,med(lat[v],rounds),med(rt,rounds),med(dl,rounds),med(cpu[v],rounds),med(dc,rounds));}
  return 0;}
