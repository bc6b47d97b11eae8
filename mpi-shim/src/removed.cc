// The MPI-1 functions MPI-3.0 removed (deprecated since MPI-2): old programs
// and test suites still call them, so each is the call that replaced it.
#include "shim.h"

extern "C" {

BCS_PMPI_ALIAS(Address)
int PMPI_Address(void* location, MPI_Aint* address) {
  return PMPI_Get_address(location, address);
}

BCS_PMPI_ALIAS(Errhandler_create)
int PMPI_Errhandler_create(MPI_Handler_function* function, MPI_Errhandler* errhandler) {
  return PMPI_Comm_create_errhandler(function, errhandler);
}

BCS_PMPI_ALIAS(Errhandler_get)
int PMPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return PMPI_Comm_get_errhandler(comm, errhandler);
}

BCS_PMPI_ALIAS(Errhandler_set)
int PMPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

BCS_PMPI_ALIAS(Type_extent)
int PMPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return PMPI_Type_get_extent(datatype, &lb, extent);
}

BCS_PMPI_ALIAS(Type_lb)
int PMPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint extent = 0;
  return PMPI_Type_get_extent(datatype, displacement, &extent);
}

BCS_PMPI_ALIAS(Type_ub)
int PMPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint lb = 0, extent = 0;
  const int e = PMPI_Type_get_extent(datatype, &lb, &extent);
  if (e == MPI_SUCCESS && displacement) *displacement = lb + extent;
  return e;
}

BCS_PMPI_ALIAS(Type_hindexed)
int PMPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                       MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype,
                                   newtype);
}

BCS_PMPI_ALIAS(Type_hvector)
int PMPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

BCS_PMPI_ALIAS(Type_struct)
int PMPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                     MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  return PMPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements,
                                 array_of_types, newtype);
}

}  // extern "C"
